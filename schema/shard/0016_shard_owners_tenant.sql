-- A search of a prefix or of no owner (docs/architecture.md, "Reading both layouts", "Pages")
-- asks once per shard-day whether the shard's mirror holds any owner of the token's tenant: a
-- shard-day with none is skipped without walking its rows (a one-time filter), through this
-- index rather than a scan of every owner mirrored on the shard.
CREATE INDEX shard_owners_tenant ON shard_owners (kind, tenant);
