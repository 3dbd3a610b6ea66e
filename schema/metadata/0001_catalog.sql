-- The shard catalog: groups, shards, owner mappings, retention policies, and a version that
-- every change bumps (and announces with NOTIFY shardlog_catalog) so routers refresh.

CREATE TABLE shard_groups (
    name        text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_-]{0,62}$'),
    placement   text NOT NULL CHECK (placement IN ('random', 'hash')),
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE shards (
    name        text PRIMARY KEY CHECK (name ~ '^[a-z][a-z0-9_-]{0,62}$'),
    group_name  text NOT NULL REFERENCES shard_groups (name),
    dsn         text NOT NULL UNIQUE CHECK (dsn <> ''),
    state       text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'draining', 'down')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX shards_group_idx ON shards (group_name);

CREATE TABLE owners (
    kind        text NOT NULL CHECK (kind IN ('audit', 'flow')),
    key         text NOT NULL CHECK (char_length(key) BETWEEN 1 AND 256),
    group_name  text NOT NULL REFERENCES shard_groups (name),
    assigned_by text NOT NULL CHECK (assigned_by IN ('rule', 'admin')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, key)
);
CREATE INDEX owners_group_idx ON owners (group_name);

CREATE TABLE retention_policies (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind        text NOT NULL CHECK (kind IN ('audit', 'flow')),
    group_name  text NOT NULL REFERENCES shard_groups (name),
    owner_key   text CHECK (owner_key IS NULL OR char_length(owner_key) BETWEEN 1 AND 256),
    keep_days   integer NOT NULL CHECK (keep_days >= 1),
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE NULLS NOT DISTINCT (kind, group_name, owner_key)
);

CREATE TABLE catalog_version (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    version     bigint NOT NULL,
    changed_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO catalog_version (version) VALUES (1);

CREATE FUNCTION bump_catalog_version() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    new_version bigint;
BEGIN
    UPDATE catalog_version SET version = version + 1, changed_at = now()
    RETURNING version INTO new_version;
    PERFORM pg_notify('shardlog_catalog', new_version::text);
    RETURN NULL;
END;
$$;

CREATE TRIGGER shard_groups_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON shard_groups
    FOR EACH STATEMENT EXECUTE FUNCTION bump_catalog_version();
CREATE TRIGGER shards_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON shards
    FOR EACH STATEMENT EXECUTE FUNCTION bump_catalog_version();
CREATE TRIGGER owners_changed AFTER UPDATE OR DELETE OR TRUNCATE ON owners
    FOR EACH STATEMENT EXECUTE FUNCTION bump_catalog_version();
CREATE TRIGGER retention_policies_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON retention_policies
    FOR EACH STATEMENT EXECUTE FUNCTION bump_catalog_version();
