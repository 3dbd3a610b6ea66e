-- Synchronous replication per shard group: whether a write to the group's shards waits for a
-- standby before it is acknowledged (the router sets synchronous_commit per batch: 'on' or
-- 'local'). NULL takes the kind's default: synchronous for audit rows, asynchronous for flows.
ALTER TABLE shard_groups ADD COLUMN synchronous boolean;
