-- The shards' mirrors of an owner to correct (docs/architecture.md, "The reach is checked
-- twice"): a remap that moves an owner to another tenant records it here in its own catalog
-- transaction; the router takes it out once every shard the owner has rows on says what the
-- catalog says (router/catalog/mirror.py). Until then readers that hold rows to a token's
-- reach through the mirrors (pages, reports and exports of a prefix or of no owner) correct
-- them first, or answer 503: a stale mirror never lets a foreign owner's rows into an answer,
-- aggregates included.
CREATE TABLE mirror_pending (
    kind        text NOT NULL CHECK (kind IN ('audit', 'flow')),
    owner_id    bigint NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, owner_id)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON mirror_pending TO shardlog_catalog;
