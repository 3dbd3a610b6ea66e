-- Every day table on every shard, recorded by the router that created it before any row is
-- written to it, so that a search plans exactly the (shard, table) pairs that can hold rows.
CREATE TABLE day_tables (
    kind       text NOT NULL CHECK (kind IN ('audit', 'flow')),
    owner_id   bigint NOT NULL,
    day        date NOT NULL,
    shard      text NOT NULL REFERENCES shards (name),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, owner_id, day, shard)
);
CREATE INDEX day_tables_day_idx ON day_tables (day);

-- Secrets every router shares: the key that signs page cursors.
CREATE TABLE router_secrets (
    name   text PRIMARY KEY,
    secret bytea NOT NULL CHECK (length(secret) >= 16)
);
INSERT INTO router_secrets (name, secret) VALUES (
    'cursor',
    decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex')
);
