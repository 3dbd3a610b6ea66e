-- The coordinator's flow parent tables (schema fdw, one per switch: router/search/fdw.py) gain
-- the columns shard migration 0009 gave the flow day tables, so that the fdw path reads what
-- fan-out reads. Parents made from now on have them from the start (fdw.PARENT_COLUMNS).
-- ALTER TABLE on a parent adds the column to its foreign children too; a foreign table reads
-- its columns by name, so the children read the shards' new columns. No shard data is
-- touched. The pattern is router/db/names.py's parent_table() for flows.

DO $parents$
DECLARE
    parent regclass;
BEGIN
    FOR parent IN
        SELECT c.oid::regclass FROM pg_class c
        WHERE c.relnamespace = 'fdw'::regnamespace AND c.relkind = 'r'
          AND c.relname ~ '^flow_s([1-9][0-9]{0,18})$'
    LOOP
        EXECUTE format(
            'ALTER TABLE %s ADD COLUMN IF NOT EXISTS tcp_flags smallint, '
            'ADD COLUMN IF NOT EXISTS sampling_rate integer, '
            'ADD COLUMN IF NOT EXISTS sampled boolean, '
            'ADD COLUMN IF NOT EXISTS sampling_mixed boolean',
            parent
        );
    END LOOP;
END
$parents$;
