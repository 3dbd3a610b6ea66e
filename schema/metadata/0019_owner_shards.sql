-- Shared tables for small owners, readers (docs/architecture.md, "Reading both layouts"): the
-- shards whose shared tables may hold an owner's (or switch's) rows, from the day `since` on.
-- One row per owner and shard, never per owner-day: a search of an owner reads the shared
-- tables of the window's days (shared_tables) on these shards beside its own day tables
-- (day_tables). Written before an owner's first shared row goes to a shard.
CREATE TABLE owner_shards (
    kind     text NOT NULL CHECK (kind IN ('audit', 'flow')),
    owner_id bigint NOT NULL,
    shard    text NOT NULL REFERENCES shards (name),
    since    date NOT NULL,
    PRIMARY KEY (kind, owner_id, shard)
);
CREATE INDEX owner_shards_shard_idx ON owner_shards (shard);
GRANT SELECT, INSERT, UPDATE, DELETE ON owner_shards TO shardlog_catalog;
