-- Least privilege on the metadata server (docs/architecture.md, "PostgreSQL roles"): the router
-- and the CLI's catalog commands log in as shardlog_catalog, which may change the rows the router
-- changes at run time and nothing else; migrations and role set-up stay with the bootstrap
-- superuser, which owns every catalog table. The role is cluster-wide and exists before this
-- runs: the bootstrap superuser creates it, with its password, at bring-up (router/db/roles.py).
--   shardlog_catalog   LOGIN; SELECT on the catalog; INSERT/UPDATE/DELETE where the router writes
--                      (no TRUNCATE, no DDL on catalog tables); owns the postgres_fdw coordinator's
--                      objects (foreign servers, user mappings, schema fdw's tables but
--                      fdw.children), which it makes and drops as tables come and go.

DO $database$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'shardlog_catalog') THEN
        RAISE EXCEPTION 'the role shardlog_catalog is missing on the metadata server'
            USING HINT = 'shardlog migrate (or shardlog up) creates it first';
    END IF;
    EXECUTE format('REVOKE ALL ON DATABASE %I FROM PUBLIC', current_database());
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO shardlog_catalog', current_database());
END
$database$;

REVOKE ALL ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO shardlog_catalog;

-- What the router reads and never changes.
GRANT SELECT ON catalog_version, router_secrets, shardlog_migrations TO shardlog_catalog;
-- What it changes (the admin API, ingest, retention, tokens' last use).
GRANT SELECT, INSERT, UPDATE ON shard_groups, shards, api_tokens, retention_runs
    TO shardlog_catalog;
GRANT SELECT, INSERT, UPDATE, DELETE
    ON owners, retention_policies, tenants, day_tables, idempotency_requests TO shardlog_catalog;
GRANT SELECT, INSERT ON retention_drops TO shardlog_catalog;

-- A catalog change bumps the version (and NOTIFYs routers) as the function's owner, so the
-- router needs no write privilege on catalog_version.
ALTER FUNCTION bump_catalog_version() SECURITY DEFINER SET search_path = pg_catalog, public;
REVOKE ALL ON FUNCTION bump_catalog_version() FROM PUBLIC;

-- The postgres_fdw coordinator (router/search/fdw.py) attaches and detaches day tables as
-- ingest and retention make and drop them, so its objects are the catalog role's. USAGE on the
-- wrapper lets it make foreign servers; postgres_fdw makes a non-superuser's connections prove
-- a password, so that gives it no way into a server it has no password of.
GRANT USAGE ON FOREIGN DATA WRAPPER postgres_fdw TO shardlog_catalog;
REVOKE ALL ON SCHEMA fdw FROM PUBLIC;
GRANT USAGE, CREATE ON SCHEMA fdw TO shardlog_catalog;
GRANT SELECT, INSERT, DELETE ON fdw.children TO shardlog_catalog;

-- ... and those of an older router, made by the bootstrap superuser.
DO $existing$
DECLARE
    server name;
    relation record;
BEGIN
    FOR server IN
        SELECT s.srvname FROM pg_foreign_server s JOIN pg_foreign_data_wrapper w
            ON w.oid = s.srvfdw WHERE w.fdwname = 'postgres_fdw'
    LOOP
        EXECUTE format('ALTER SERVER %I OWNER TO shardlog_catalog', server);
    END LOOP;
    FOR relation IN
        SELECT c.oid::regclass AS name, c.relkind FROM pg_class c
        WHERE c.relnamespace = 'fdw'::regnamespace AND c.relkind IN ('r', 'f')
          AND c.oid <> 'fdw.children'::regclass
    LOOP
        EXECUTE format('ALTER %s %s OWNER TO shardlog_catalog',
                       CASE relation.relkind WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END,
                       relation.name);
    END LOOP;
END
$existing$;
