-- Consistent searches (consistent=true, docs/api.md "Paging"): every row of a day table records
-- the transaction that inserted it, so that a later page can keep to the rows a snapshot of the
-- shard saw (router/search/snapshot.py). New day tables have the column from the start
-- (router/db/ddl.py); this gives it to those already here. Their rows keep NULL there: they
-- are older than any snapshot taken after this migration. Both steps change the catalog only,
-- no table is rewritten; like 0003_roles.sql, it holds a lock on every day table until it
-- commits (a shard with more day tables than the lock table holds needs a larger
-- max_locks_per_transaction for it). The pattern is router/db/names.py's day_table_regex().

DO $existing$
DECLARE
    day_table regclass;
BEGIN
    FOR day_table IN
        SELECT c.oid::regclass FROM pg_class c
        WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'
          AND c.relname ~ '^(audit_o|flow_s)([1-9][0-9]{0,18})_([0-9]{8})$'
    LOOP
        EXECUTE format('ALTER TABLE %s ADD COLUMN IF NOT EXISTS created_xid xid8', day_table);
        EXECUTE format(
            'ALTER TABLE %s ALTER COLUMN created_xid SET DEFAULT pg_current_xact_id()', day_table
        );
    END LOOP;
END
$existing$;
