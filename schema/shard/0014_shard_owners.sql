-- Shared tables for small owners (docs/architecture.md, "Shared tables for small owners",
-- "Layout"): the shard's mirror of the catalog's mapping of each owner that has rows on it, so
-- a search of a prefix or of no owner keeps to a token's reach in the shard (an EXISTS probe of
-- the primary key per shared row) without naming the owners. Written in a shared write's own
-- transaction and repaired by the router after a remap (router/catalog/mirror.py); the router
-- checks every owner of a page against the catalog again, so a stale row fails a page, never
-- leaks a row. Owned by the bootstrap superuser like the ledger: no role may drop it.
CREATE TABLE shard_owners (
    kind     text NOT NULL CHECK (kind IN ('audit', 'flow')),
    owner_id bigint NOT NULL,
    tenant   text NOT NULL,
    key      text NOT NULL,
    PRIMARY KEY (kind, owner_id)
);
GRANT SELECT, INSERT, UPDATE ON shard_owners TO shardlog_writer;
GRANT SELECT ON shard_owners TO shardlog_reader;
