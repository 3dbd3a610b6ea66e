-- One row per committed batch of an idempotent write, in the batch's own transaction: a retried
-- batch finds its row and is skipped, so a row is never stored or merged twice.
CREATE TABLE ingest_ledger (
    request_key  text NOT NULL,
    part         text NOT NULL,
    table_name   text NOT NULL,
    rows         integer NOT NULL,
    committed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (request_key, part)
);
CREATE INDEX ingest_ledger_committed_idx ON ingest_ledger (committed_at);
