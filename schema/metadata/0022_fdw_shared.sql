-- The coordinator's shared parents (docs/architecture.md, "Reading both layouts", fdw):
-- fdw.audit_shared and fdw.flow_shared, one foreign child per shard and shared day, recorded
-- in fdw.children as owners' children are, with no owner (their rows carry it): the shard of a
-- row read through a parent comes from the same join whichever parent it was read through.
ALTER TABLE fdw.children ALTER COLUMN owner_id DROP NOT NULL;
-- UNIQUE (kind, owner_id, day, shard) holds no NULL owner to another: one child per shard-day.
CREATE UNIQUE INDEX children_shared_idx ON fdw.children (kind, day, shard)
    WHERE owner_id IS NULL;
