-- The metadata instance is also the postgres_fdw coordinator: one foreign server per shard,
-- one parent table per owner in schema fdw, and a foreign table per (shard, day table) attached
-- to it as a child (with a CHECK on its day, so the planner skips days out of range).
CREATE EXTENSION IF NOT EXISTS postgres_fdw;
CREATE SCHEMA IF NOT EXISTS fdw;

-- Which shard each child foreign table reads, so pages sort on (ts, shard, id) as fan-out does.
CREATE TABLE fdw.children (
    child    regclass PRIMARY KEY,
    kind     text NOT NULL CHECK (kind IN ('audit', 'flow')),
    owner_id bigint NOT NULL,
    day      date NOT NULL,
    shard    text NOT NULL,
    UNIQUE (kind, owner_id, day, shard)
);
