-- Reports' distinct counts (router/reports/hll.py): HyperLogLog sketches of the hll extension
-- (Debian package postgresql-15-hll), built per group on the shard and unioned by the router.
-- Migrations run as the bootstrap superuser, who may create it; its functions live in schema
-- public, executable by PUBLIC, and shardlog_reader has USAGE on public (0003_roles.sql).
CREATE EXTENSION IF NOT EXISTS hll;
