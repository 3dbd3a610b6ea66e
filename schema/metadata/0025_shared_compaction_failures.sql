-- A shard-day's last failed compaction step (docs/architecture.md, "Compacting shared days";
-- router/compaction/shared.py), kept on its shared_tables row as an owner-day's is kept in
-- compaction_failures: the step, the error, how many runs in a row failed it, and when, until
-- a later run takes it a step further. The row's drop by retention takes it along.
ALTER TABLE shared_tables
    ADD COLUMN failed_step text CHECK (failed_step IN ('copy', 'switch', 'clear')),
    ADD COLUMN failure text,
    ADD COLUMN failures integer NOT NULL DEFAULT 0 CHECK (failures >= 0),
    ADD COLUMN first_failed_at timestamptz,
    ADD COLUMN last_failed_at timestamptz;
