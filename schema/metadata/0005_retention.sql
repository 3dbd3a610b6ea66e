-- Retention: archive-before-drop per policy, a hold on restored days, and the history of
-- every run with what it dropped.
ALTER TABLE retention_policies ADD COLUMN archive boolean NOT NULL DEFAULT false;

-- A restored day is kept until this day (inclusive) whatever the policy says.
ALTER TABLE day_tables ADD COLUMN hold_until date;

CREATE TABLE retention_runs (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    started_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    trigger        text NOT NULL CHECK (trigger IN ('cli', 'router', 'erase')),
    as_of          date NOT NULL,
    dry_run        boolean NOT NULL,
    forced         boolean NOT NULL,
    status         text NOT NULL
                   CHECK (status IN ('running', 'done', 'partial', 'refused', 'failed')),
    message        text,
    tables_total   integer NOT NULL DEFAULT 0,
    tables_dropped integer NOT NULL DEFAULT 0,
    tables_failed  integer NOT NULL DEFAULT 0,
    rows_dropped   bigint NOT NULL DEFAULT 0,
    bytes_dropped  bigint NOT NULL DEFAULT 0
);
CREATE INDEX retention_runs_started_idx ON retention_runs (started_at DESC);

-- Owners are named by id: an erased owner's key is not kept here.
CREATE TABLE retention_drops (
    run_id     bigint NOT NULL REFERENCES retention_runs (id) ON DELETE CASCADE,
    kind       text NOT NULL CHECK (kind IN ('audit', 'flow')),
    owner_id   bigint NOT NULL,
    day        date NOT NULL,
    shard      text NOT NULL,
    table_name text NOT NULL,
    outcome    text NOT NULL
               CHECK (outcome IN ('dropped', 'already_gone', 'failed', 'would_drop')),
    rows       bigint,
    bytes      bigint,
    archive    text,
    error      text,
    at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, kind, owner_id, day, shard)
);
