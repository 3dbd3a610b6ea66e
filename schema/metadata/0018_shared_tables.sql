-- Shared tables for small owners (docs/architecture.md, "Shared tables for small owners"): every
-- shard-day whose shared tables (audit_shared_D, flow_shared_D) and owner_days_D exist on its
-- shard, registered by the router job that makes them ahead of their day (router/sharing/
-- ahead.py) and removed by retention before it drops them, as day_tables entries are.
-- `layout`: 'heap' until the shard-day is compacted (a later step of the design).
CREATE TABLE shared_tables (
    kind       text NOT NULL CHECK (kind IN ('audit', 'flow')),
    day        date NOT NULL,
    shard      text NOT NULL REFERENCES shards (name),
    layout     text NOT NULL DEFAULT 'heap' CHECK (layout IN ('heap', 'compacted')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, day, shard)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON shared_tables TO shardlog_catalog;
