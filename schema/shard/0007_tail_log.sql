-- Live tail (router/tail, docs/architecture.md "Live tail"): every write of a part into a day
-- table adds one row here in its own transaction, naming the table and the range of the row
-- times it wrote (for flows, of the rows it inserted or merged into). A router learns what
-- was committed since a snapshot of the shard by the rows whose transaction that snapshot did
-- not see; it then reads just those tables over just those time ranges. Kept for
-- SHARDLOG_TAIL__LOG_KEEP_S (the housekeeping deletes older rows): the horizon of a resume.
CREATE TABLE tail_log (
    xid        xid8 NOT NULL DEFAULT pg_current_xact_id(),
    table_name text NOT NULL,
    first_ts   timestamptz NOT NULL,
    last_ts    timestamptz NOT NULL,
    rows       bigint NOT NULL,
    logged_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tail_log_xid_idx ON tail_log (xid);
CREATE INDEX tail_log_logged_at_idx ON tail_log (logged_at);
GRANT SELECT, INSERT, DELETE ON tail_log TO shardlog_writer;
GRANT SELECT ON tail_log TO shardlog_reader;

-- A merge into a flow row is an event of the tail too: the merging transaction is recorded in
-- merged_xid (NULL until the first merge; not indexed, so merges stay HOT updates). New flow
-- tables have the column from the start (router/db/ddl.py); this gives it to those already
-- here. Catalog only, no table is rewritten. The pattern is router/db/names.py's
-- day_table_regex(), flows only.
DO $existing$
DECLARE
    day_table regclass;
BEGIN
    FOR day_table IN
        SELECT c.oid::regclass FROM pg_class c
        WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'
          AND c.relname ~ '^(flow_s)([1-9][0-9]{0,18})_([0-9]{8})$'
    LOOP
        EXECUTE format('ALTER TABLE %s ADD COLUMN IF NOT EXISTS merged_xid xid8', day_table);
    END LOOP;
END
$existing$;
