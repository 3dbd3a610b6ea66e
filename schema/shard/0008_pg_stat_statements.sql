-- Statement statistics per shard (pg_stat_statements; bench/pgbadger reads its top entries,
-- operators query it: docs/operations.md "Statement statistics"). Creating the extension does
-- not need the library loaded, so this applies on a server started before
-- shared_preload_libraries named it; reading the view there fails until that server restarts.
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
