-- When a shard-day's shared rows were switched to their compacted layout (docs/architecture.md,
-- "Compacting shared days"): the clear of the shared table waits SHARDLOG_COMPACTION__CLEAR_AFTER_S
-- from it, as an owner-day's waits from day_tables.layout_at.
ALTER TABLE shared_tables ADD COLUMN layout_at timestamptz;
