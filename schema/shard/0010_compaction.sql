-- Compacted days (router/compaction, docs/architecture.md "Compacted days"): one row per
-- owner-day of this shard whose rows were packed into its day's segment table
-- (audit_segments_YYYYMMDD). `snapshot` is the snapshot of the transaction that packed them:
-- the heap rows it saw are in the segments, so readers of the compacted layout take from the
-- heap only the rows it did not see (late writes). `rows` and `checksum` are what the copy
-- verified (count and the sum of a 64-bit hash of each row's canonical text); `cleared_at`
-- says when the heap rows the snapshot saw were deleted.
CREATE TABLE compacted_days (
    kind        text NOT NULL CHECK (kind IN ('audit', 'flow')),
    owner_id    bigint NOT NULL,
    day         date NOT NULL,
    snapshot    pg_snapshot NOT NULL,
    segments    integer NOT NULL,
    rows        bigint NOT NULL,
    checksum    numeric NOT NULL,
    heap_bytes  bigint NOT NULL,
    packed_bytes bigint NOT NULL,
    compacted_at timestamptz NOT NULL DEFAULT now(),
    cleared_at  timestamptz,
    PRIMARY KEY (kind, owner_id, day)
);
-- The compaction job writes as the writer (a member of shardlog_tables, which owns the segment
-- tables and views it makes); readers need the snapshot of each compacted owner-day.
GRANT SELECT ON compacted_days TO shardlog_reader, shardlog_retention;
GRANT SELECT, INSERT, UPDATE, DELETE ON compacted_days TO shardlog_writer;
-- The segment tables' views read compacted_days as their owner.
GRANT SELECT ON compacted_days TO shardlog_tables;

-- The segment codec (native/pg_segments, built and installed by `make install`), where this
-- server has it: compaction needs it on the shard, reads of compacted days too. A server that
-- gets it later: `CREATE EXTENSION shardlog_segments` as the shard's superuser (operations.md).
DO $codec$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'shardlog_segments') THEN
        CREATE EXTENSION IF NOT EXISTS shardlog_segments;
    END IF;
END
$codec$;
