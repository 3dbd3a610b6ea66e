-- Flows from exporters (router/collector: NetFlow v5/v9, IPFIX) keep what REST records do not
-- carry: the TCP flags seen, and the sampling their packets were counted under (bytes and
-- packets are already scaled up by the rate; sampling_mixed marks a row merged from records
-- of different sampling). New day tables have the columns from the start (router/db/ddl.py);
-- this gives them to those already here, rows keeping NULL and false. Adding a column with a
-- constant default changes the catalog only: no table is rewritten. Like 0005, it locks every
-- flow day table until it commits. The pattern is router/db/names.py's day_table_regex().

DO $existing$
DECLARE
    day_table regclass;
BEGIN
    FOR day_table IN
        SELECT c.oid::regclass FROM pg_class c
        WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'
          AND c.relname ~ '^flow_s([1-9][0-9]{0,18})_([0-9]{8})$'
    LOOP
        EXECUTE format(
            'ALTER TABLE %s ADD COLUMN IF NOT EXISTS tcp_flags smallint, '
            'ADD COLUMN IF NOT EXISTS sampling_rate integer, '
            'ADD COLUMN IF NOT EXISTS sampled boolean NOT NULL DEFAULT false, '
            'ADD COLUMN IF NOT EXISTS sampling_mixed boolean NOT NULL DEFAULT false',
            day_table
        );
    END LOOP;
END
$existing$;
