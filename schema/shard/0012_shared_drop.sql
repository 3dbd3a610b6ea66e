-- Shared tables for small owners (docs/architecture.md, "Shared tables for small owners"):
-- retention drops an expired shard-day's shared tables (audit_shared_D, flow_shared_D) and its
-- owner_days_D only through this function, as day tables only through shardlog_drop_day_table
-- (0003, 0010): it runs as shardlog_tables, which owns them, and refuses any other relation.
-- The pattern is router/db/names.py's shared_table_regex().
CREATE FUNCTION shardlog_drop_shared_table(shared_table regclass) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $function$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_class c
        WHERE c.oid = shared_table AND c.relkind = 'r'
          AND c.relnamespace = 'public'::regnamespace
          AND c.relowner = 'shardlog_tables'::regrole
          AND c.relname ~ '^(?:(audit|flow)_shared|(owner_days))_([0-9]{8})$'
    ) THEN
        RAISE EXCEPTION '% is not a shared table', shared_table
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    EXECUTE format('DROP TABLE %s', shared_table);
END
$function$;

ALTER FUNCTION shardlog_drop_shared_table(regclass) OWNER TO shardlog_tables;
REVOKE ALL ON FUNCTION shardlog_drop_shared_table(regclass) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION shardlog_drop_shared_table(regclass) TO shardlog_retention;
