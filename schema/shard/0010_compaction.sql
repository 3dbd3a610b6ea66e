-- Compacted days (router/compaction, docs/architecture.md "Compacted days"): one row per
-- owner-day of this shard whose rows were packed into its day's segment table
-- (audit_segments_YYYYMMDD). `snapshot` is the snapshot of the transaction that packed them:
-- the heap rows it saw are in the segments, so readers of the compacted layout take from the
-- heap only the rows it did not see (late writes). `rows` and `checksum` are what the copy
-- verified (count and the sum of a 64-bit hash of each row's canonical text); `cleared_at`
-- says when the heap rows the snapshot saw were deleted.
CREATE TABLE compacted_days (
    kind        text NOT NULL CHECK (kind IN ('audit', 'flow')),
    owner_id    bigint NOT NULL,
    day         date NOT NULL,
    snapshot    pg_snapshot NOT NULL,
    segments    integer NOT NULL,
    rows        bigint NOT NULL,
    checksum    numeric NOT NULL,
    heap_bytes  bigint NOT NULL,
    packed_bytes bigint NOT NULL,
    compacted_at timestamptz NOT NULL DEFAULT now(),
    cleared_at  timestamptz,
    PRIMARY KEY (kind, owner_id, day)
);
-- The compaction job writes as the writer (a member of shardlog_tables, which owns the segment
-- tables and views it makes); readers need the snapshot of each compacted owner-day.
GRANT SELECT ON compacted_days TO shardlog_reader, shardlog_retention;
GRANT SELECT, INSERT, UPDATE, DELETE ON compacted_days TO shardlog_writer;
-- The segment tables' views read compacted_days as their owner.
GRANT SELECT ON compacted_days TO shardlog_tables;

-- The segment codec (native/pg_segments, built and installed by `make install`), where this
-- server has it: compaction needs it on the shard, reads of compacted days too. A server that
-- gets it later: `CREATE EXTENSION shardlog_segments` as the shard's superuser (operations.md).
DO $codec$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'shardlog_segments') THEN
        CREATE EXTENSION IF NOT EXISTS shardlog_segments;
    END IF;
END
$codec$;

-- Retention drops a compacted owner-day whole: its view, its segments (and the day's segment
-- table once it holds no owner's any more), its compacted_days row, then its heap. Still
-- only day tables, and still only through this function (0003).
GRANT DELETE ON compacted_days TO shardlog_tables;

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
        IF NOT EXISTS (SELECT 1 FROM public.compacted_days c WHERE c.kind = day_kind
                       AND c.day = day_of AND c.owner_id <> parts[2]::bigint) THEN
            EXECUTE format('DROP TABLE %s', segments);
        END IF;
    END IF;
    DELETE FROM public.compacted_days c
    WHERE c.kind = day_kind AND c.owner_id = parts[2]::bigint AND c.day = day_of;
    EXECUTE format('DROP TABLE %s', day_table);
END
$function$;
