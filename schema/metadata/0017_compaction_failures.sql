-- Compaction failures (router/compaction/runner.py, docs/operations.md "Compaction"): the
-- owner-days whose last compaction attempt failed, with the step, the error and how many runs
-- in a row failed, until a later run takes them a step further. A day table dropped by
-- retention takes its record with it.
CREATE TABLE compaction_failures (
    kind            text NOT NULL,
    owner_id        bigint NOT NULL,
    day             date NOT NULL,
    shard           text NOT NULL,
    step            text NOT NULL CHECK (step IN ('copy', 'switch', 'clear')),
    error           text NOT NULL,
    failures        integer NOT NULL DEFAULT 1 CHECK (failures >= 1),
    first_failed_at timestamptz NOT NULL,
    last_failed_at  timestamptz NOT NULL,
    PRIMARY KEY (kind, owner_id, day, shard),
    FOREIGN KEY (kind, owner_id, day, shard)
        REFERENCES day_tables (kind, owner_id, day, shard) ON DELETE CASCADE
);
GRANT SELECT, INSERT, UPDATE, DELETE ON compaction_failures TO shardlog_catalog;
