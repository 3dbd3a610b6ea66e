-- shardlog_segments 1.1: an unpack bounded by a ts range, [from_ts, to_ts). The rows outside it
-- are stepped over without being built, so a search of an hour of a segment that spans a day
-- builds the hour's rows alone (docs/architecture.md, "Reading a compacted owner-day").
\echo Use "ALTER EXTENSION shardlog_segments UPDATE" to load this file. \quit

CREATE FUNCTION shardlog_unpack_audit(block bytea, from_ts timestamptz, to_ts timestamptz)
RETURNS TABLE (ord int, id bigint, ts timestamptz, content text, attrs jsonb, created_xid xid8)
AS 'MODULE_PATHNAME', 'shardlog_unpack_audit'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE ROWS 100;

-- A filter probe detoasts its segment's filter: the planner should test a segment's owner and
-- bounds first (a cost of 1, as the comparisons', let it probe every owner's segments of a
-- seq scan). Measured in bench/storage: a third off a first page.
ALTER FUNCTION shardlog_may_contain(bytea, text) COST 1000;
