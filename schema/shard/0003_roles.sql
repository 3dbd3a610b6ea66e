-- Least privilege (docs/architecture.md, "PostgreSQL roles"): what each of shardlog's roles may
-- do in this database. The roles are cluster-wide and exist before this runs: the bootstrap
-- superuser creates them, with their passwords, at bring-up (router/db/roles.py).
--   shardlog_tables     NOLOGIN; owns every day table; with the writer, the only role that may
--                       create in schema public.
--   shardlog_writer     member of shardlog_tables: creates day tables as it and writes them;
--                       reads, adds and prunes the ingest ledger; temporary tables (flow staging).
--   shardlog_reader     SELECT on the day tables, nothing else (and read-only transactions).
--   shardlog_retention  SELECT on the day tables (counts, archives); locks and drops day tables
--                       only through the two functions below, which run as shardlog_tables.
-- Nobody else but superusers may connect; the superuser keeps what it had (migrations, stamping).

DO $database$
BEGIN
    IF (SELECT count(*) FROM pg_roles WHERE rolname IN
        ('shardlog_tables', 'shardlog_writer', 'shardlog_reader', 'shardlog_retention')) < 4
    THEN
        RAISE EXCEPTION 'shardlog''s roles are missing on this server'
            USING HINT = 'shardlog migrate, or the registration of the shard, creates them first';
    END IF;
    EXECUTE format('REVOKE ALL ON DATABASE %I FROM PUBLIC', current_database());
    EXECUTE format('GRANT CONNECT, TEMPORARY ON DATABASE %I TO shardlog_writer',
                   current_database());
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO shardlog_reader, shardlog_retention',
                   current_database());
END
$database$;

REVOKE ALL ON SCHEMA public FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO shardlog_writer, shardlog_reader, shardlog_retention;
GRANT USAGE, CREATE ON SCHEMA public TO shardlog_tables;

GRANT SELECT, INSERT, DELETE ON ingest_ledger TO shardlog_writer;

-- Day tables to come (created by the writer as shardlog_tables, router/db/ddl.py) ...
ALTER DEFAULT PRIVILEGES FOR ROLE shardlog_tables IN SCHEMA public
    GRANT SELECT ON TABLES TO shardlog_reader, shardlog_retention;

-- ... and those already here (made by an older router as the bootstrap superuser). The pattern
-- is router/db/names.py's day_table_regex().
DO $existing$
DECLARE
    day_table regclass;
BEGIN
    FOR day_table IN
        SELECT c.oid::regclass FROM pg_class c
        WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'
          AND c.relname ~ '^(audit_o|flow_s)([1-9][0-9]{0,18})_([0-9]{8})$'
    LOOP
        EXECUTE format('ALTER TABLE %s OWNER TO shardlog_tables', day_table);
        EXECUTE format('GRANT SELECT ON %s TO shardlog_reader, shardlog_retention', day_table);
    END LOOP;
END
$existing$;

-- Retention's only ways to change anything. A day table is a table of schema public owned by
-- shardlog_tables: nothing else is (the ledger, shard_identity and the migration ledger belong to
-- the bootstrap superuser), and the functions refuse anything else before acting.
CREATE FUNCTION shardlog_lock_day_table(day_table regclass, lock_mode text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $function$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_class c
        WHERE c.oid = day_table AND c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace
          AND c.relowner = 'shardlog_tables'::regrole
    ) THEN
        RAISE EXCEPTION '% is not a day table', day_table USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF lock_mode = 'SHARE' THEN
        EXECUTE format('LOCK TABLE %s IN SHARE MODE', day_table);
    ELSIF lock_mode = 'ACCESS EXCLUSIVE' THEN
        EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', day_table);
    ELSE
        RAISE EXCEPTION 'lock mode % is neither SHARE nor ACCESS EXCLUSIVE', lock_mode
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
END
$function$;

CREATE FUNCTION shardlog_drop_day_table(day_table regclass) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $function$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_class c
        WHERE c.oid = day_table AND c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace
          AND c.relowner = 'shardlog_tables'::regrole
    ) THEN
        RAISE EXCEPTION '% is not a day table', day_table USING ERRCODE = 'insufficient_privilege';
    END IF;
    EXECUTE format('DROP TABLE %s', day_table);
END
$function$;

ALTER FUNCTION shardlog_lock_day_table(regclass, text) OWNER TO shardlog_tables;
ALTER FUNCTION shardlog_drop_day_table(regclass) OWNER TO shardlog_tables;
REVOKE ALL ON FUNCTION shardlog_lock_day_table(regclass, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION shardlog_drop_day_table(regclass) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION shardlog_lock_day_table(regclass, text) TO shardlog_retention;
GRANT EXECUTE ON FUNCTION shardlog_drop_day_table(regclass) TO shardlog_retention;
