-- count=estimate of flows samples the rows of a day table through a small covering index
-- (router/search/estimate.py): the rows whose id is a multiple of 16, keyed by id % 256, so that
-- an estimate reads 1/256 to 1/16 of the rows without touching the table. New day tables get it
-- with their other indexes (router/db/ddl.py, flow_sample_index: the same definition, checked by
-- a test); this gives it to those made before. Building it reads each table once and holds off
-- writes to that table meanwhile (a few seconds per 10M rows). The name pattern is
-- router/db/names.py's day_table_regex(), flows only.

DO $sample$
DECLARE
    day_table regclass;
    table_name text;
BEGIN
    FOR day_table, table_name IN
        SELECT c.oid::regclass, c.relname FROM pg_class c
        WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'
          AND c.relname ~ '^(flow_s)([1-9][0-9]{0,18})_([0-9]{8})$'
    LOOP
        EXECUTE format(
            'CREATE INDEX IF NOT EXISTS %I ON %s ((id %% 256), first_seen) '
            'INCLUDE (id, src_ip, dst_ip, src_port, dst_port, ip_version, proto) '
            'WHERE id %% 16 = 0',
            table_name || '_sample', day_table);
    END LOOP;
END
$sample$;
