-- Tenants and API tokens (router/auth). Every owner and switch key belongs to exactly one
-- tenant; a token acts for one tenant with a set of scopes. Tokens are stored as the SHA-256 of
-- their secret only: the secret is shown once, when the token is created.

CREATE TABLE tenants (
    name        text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_-]{0,62}$'),
    description text NOT NULL DEFAULT '' CHECK (char_length(description) <= 1000),
    created_at  timestamptz NOT NULL DEFAULT now()
);
-- `system`: the platform itself (its own audit rows, owner shardlog.admin; admin tokens).
-- `default`: where keys written before tenants existed go, and the local cluster's tenant.
INSERT INTO tenants (name, description) VALUES
    ('system', 'the platform itself: admin tokens and the audit of admin actions'),
    ('default', 'the tenant of keys written before tenants existed');

-- Keys mapped before tenants existed belong to `default` (filled by the column default, not
-- by an UPDATE, which would bump the catalog version); new keys always name their tenant.
ALTER TABLE owners ADD COLUMN tenant text NOT NULL DEFAULT 'default' REFERENCES tenants (name);
ALTER TABLE owners ALTER COLUMN tenant DROP DEFAULT;
CREATE INDEX owners_tenant_idx ON owners (tenant);

CREATE TABLE api_tokens (
    id                 text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{16}$'),
    tenant             text NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,
    name               text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    scopes             text[] NOT NULL,
    secret_sha256      bytea NOT NULL CHECK (length(secret_sha256) = 32),
    -- Per-token limits; NULL: the router's SHARDLOG_AUTH__* default.
    rate_per_s         double precision CHECK (rate_per_s >= 0),
    ingest_bytes_per_s bigint CHECK (ingest_bytes_per_s >= 0),
    max_searches       integer CHECK (max_searches >= 1),
    created_at         timestamptz NOT NULL DEFAULT now(),
    created_by         text NOT NULL,
    expires_at         timestamptz,
    revoked_at         timestamptz,
    -- Written by routers in batches; not part of the catalog version (see the trigger below).
    last_used_at       timestamptz
);
CREATE INDEX api_tokens_tenant_idx ON api_tokens (tenant);

CREATE TRIGGER tenants_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON tenants
    FOR EACH STATEMENT EXECUTE FUNCTION bump_catalog_version();
-- Every change routers must see (a revocation above all) bumps the version and NOTIFYs them;
-- last_used_at does not, or every router would reload its catalog every few seconds.
CREATE TRIGGER api_tokens_changed
    AFTER INSERT OR DELETE OR TRUNCATE
        OR UPDATE OF id, tenant, name, scopes, secret_sha256, rate_per_s, ingest_bytes_per_s,
            max_searches, expires_at, revoked_at
    ON api_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION bump_catalog_version();
