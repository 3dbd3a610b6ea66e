-- The coordinator (postgres_fdw, backend=fdw) computes the same report as the shards' partial
-- aggregates, distinct counts included: it needs the hll extension too (router/reports/hll.py).
CREATE EXTENSION IF NOT EXISTS hll;
