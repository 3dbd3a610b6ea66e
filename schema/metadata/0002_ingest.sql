-- Owner ids: day tables are named after them (audit_o42_20261123), which keeps names short,
-- injection-proof and unique per owner whatever the owner key is.
ALTER TABLE owners ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY;
ALTER TABLE owners ADD CONSTRAINT owners_id_key UNIQUE (id);

-- Idempotent writes. A request with an Idempotency-Key is recorded here, with where each of
-- its parts goes, before anything is written. A retry finds it, refuses a different body,
-- waits for (or, once its lease ran out, takes over from) an attempt still in flight, and
-- writes each part where the record says, where the shard's ingest_ledger tells whether the
-- part already committed. A part moved away from an unreachable shard during the first attempt
-- has its new shard recorded before it is written there.
CREATE TABLE idempotency_requests (
    key          text PRIMARY KEY CHECK (char_length(key) BETWEEN 1 AND 255),
    kind         text NOT NULL CHECK (kind IN ('audit', 'flow', 'flow-delete')),
    body_hash    text NOT NULL,
    state        text NOT NULL CHECK (state IN ('running', 'done', 'failed')),
    attempts     integer NOT NULL DEFAULT 1,
    lease_until  timestamptz NOT NULL,
    placement    jsonb NOT NULL DEFAULT '{}',
    result       jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX idempotency_requests_created_idx ON idempotency_requests (created_at);
