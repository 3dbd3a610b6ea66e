-- Writes into shared tables (docs/architecture.md, "Shared tables for small owners", "The
-- write"). A tail-log line of a write into a shared table names the shared table and the
-- owner whose rows it wrote (NULL for lines of an owner's own day table).
ALTER TABLE tail_log ADD COLUMN owner_id bigint;

-- A COPY into a shared table sends the rows' own columns; their owner is the transaction's
-- shardlog.owner_id (SET LOCAL before the COPY). Unset, the default fails the row: no row is
-- ever written without its owner. New shared tables have it from router/db/ddl.py; this gives
-- it to those made ahead before. The pattern is router/db/names.py's shared_table_regex(),
-- shared tables only.
DO $existing$
DECLARE
    shared regclass;
BEGIN
    FOR shared IN
        SELECT c.oid::regclass FROM pg_class c
        WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'
          AND c.relname ~ '^(audit|flow)_shared_[0-9]{8}$'
    LOOP
        EXECUTE format(
            'ALTER TABLE %s ALTER COLUMN owner_id SET DEFAULT '
            'current_setting(''shardlog.owner_id'')::bigint',
            shared
        );
    END LOOP;
END
$existing$;
