-- Compacted shared days (docs/architecture.md, "Compacting shared days"): a shard-day's shared
-- rows compacted into its shared segment table (kind_shared_segments_D) with its view
-- (kind_shared_D_all) and its compacted_days row of owner id 0. Retention drops them with the
-- shard-day's shared table, through the same function (0012), which still refuses any relation
-- but a shared table; and a day's segment table of owner-days (0010) no longer waits for the
-- shard-day's row, whose segments are in the other table.
CREATE OR REPLACE FUNCTION shardlog_drop_shared_table(shared_table regclass) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $function$
DECLARE
    name  text;
    parts text[];
BEGIN
    SELECT c.relname INTO name FROM pg_class c
    WHERE c.oid = shared_table AND c.relkind = 'r'
      AND c.relnamespace = 'public'::regnamespace
      AND c.relowner = 'shardlog_tables'::regrole
      AND c.relname ~ '^(?:(audit|flow)_shared|(owner_days))_([0-9]{8})$';
    IF name IS NULL THEN
        RAISE EXCEPTION '% is not a shared table', shared_table
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    parts := regexp_match(name, '^(audit|flow)_shared_([0-9]{8})$');
    IF parts IS NOT NULL THEN
        EXECUTE format('DROP VIEW IF EXISTS public.%I', name || '_all');
        EXECUTE format('DROP TABLE IF EXISTS public.%I',
                       parts[1] || '_shared_segments_' || parts[2]);
        DELETE FROM public.compacted_days c
        WHERE c.kind = parts[1] AND c.owner_id = 0 AND c.day = to_date(parts[2], 'YYYYMMDD');
    END IF;
    EXECUTE format('DROP TABLE %s', shared_table);
END
$function$;

CREATE OR REPLACE FUNCTION shardlog_drop_day_table(day_table regclass) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $function$
DECLARE
    name     text;
    parts    text[];
    day_kind text;
    day_of   date;
    segments regclass;
BEGIN
    SELECT c.relname INTO name FROM pg_class c
    WHERE c.oid = day_table AND c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace
      AND c.relowner = 'shardlog_tables'::regrole;
    IF name IS NULL THEN
        RAISE EXCEPTION '% is not a day table', day_table USING ERRCODE = 'insufficient_privilege';
    END IF;
    parts := regexp_match(name, '^(audit_o|flow_s)([1-9][0-9]{0,18})_([0-9]{8})$');
    IF parts IS NULL THEN
        RAISE EXCEPTION '% is not a day table', day_table USING ERRCODE = 'insufficient_privilege';
    END IF;
    day_kind := CASE parts[1] WHEN 'audit_o' THEN 'audit' ELSE 'flow' END;
    day_of := to_date(parts[3], 'YYYYMMDD');
    EXECUTE format('DROP VIEW IF EXISTS public.%I', name || '_all');
    segments := to_regclass(format('public.%I', day_kind || '_segments_' || parts[3]));
    IF segments IS NOT NULL AND EXISTS (SELECT 1 FROM public.compacted_days c
            WHERE c.kind = day_kind AND c.owner_id = parts[2]::bigint AND c.day = day_of) THEN
        -- Locked first: a compaction of another owner of the day that commits meanwhile is
        -- seen by the check below (each statement here takes a new snapshot).
        EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', segments);
        EXECUTE format('DELETE FROM %s WHERE owner_id = $1', segments) USING parts[2]::bigint;
        -- Owner id 0 is the shard-day's shared rows: their segments are another table's.
        IF NOT EXISTS (SELECT 1 FROM public.compacted_days c WHERE c.kind = day_kind
                       AND c.day = day_of AND c.owner_id NOT IN (parts[2]::bigint, 0)) THEN
            EXECUTE format('DROP TABLE %s', segments);
        END IF;
    END IF;
    DELETE FROM public.compacted_days c
    WHERE c.kind = day_kind AND c.owner_id = parts[2]::bigint AND c.day = day_of;
    EXECUTE format('DROP TABLE %s', day_table);
END
$function$;
