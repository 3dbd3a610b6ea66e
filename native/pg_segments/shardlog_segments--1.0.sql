-- shardlog_segments 1.0: the segment codec of compacted days (docs/architecture.md, "Compacted days").
\echo Use "CREATE EXTENSION shardlog_segments" to load this file. \quit

CREATE FUNCTION shardlog_pack_audit(ids bigint[], ts timestamptz[], contents text[], attrs jsonb[],
                                    xids xid8[], level int DEFAULT 3)
RETURNS bytea
AS 'MODULE_PATHNAME', 'shardlog_pack_audit'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION shardlog_unpack_audit(block bytea)
RETURNS TABLE (ord int, id bigint, ts timestamptz, content text, attrs jsonb, created_xid xid8)
AS 'MODULE_PATHNAME', 'shardlog_unpack_audit'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE ROWS 1000;

CREATE FUNCTION shardlog_block_rows(block bytea)
RETURNS int
AS 'MODULE_PATHNAME', 'shardlog_block_rows'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION shardlog_grams(contents text[], bits_per_gram int DEFAULT 8)
RETURNS bytea
AS 'MODULE_PATHNAME', 'shardlog_grams'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION shardlog_may_contain(grams bytea, pattern text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'shardlog_may_contain'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

-- The columns of a flow day table (router/db/ddl.py), in its order.
CREATE FUNCTION shardlog_pack_flow(ids bigint[], src_ips inet[], dst_ips inet[], src_ports int[],
                                   dst_ports int[], ip_versions smallint[], protos smallint[],
                                   bytes bigint[], packets bigint[], flow_counts bigint[],
                                   first_seen timestamptz[], last_seen timestamptz[],
                                   created_xids xid8[], merged_xids xid8[], tcp_flags smallint[],
                                   sampling_rates int[], sampled boolean[],
                                   sampling_mixed boolean[], level int DEFAULT 3)
RETURNS bytea
AS 'MODULE_PATHNAME', 'shardlog_pack_flow'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION shardlog_unpack_flow(block bytea)
RETURNS TABLE (ord int, id bigint, src_ip inet, dst_ip inet, src_port int, dst_port int,
               ip_version smallint, proto smallint, bytes bigint, packets bigint,
               flow_count bigint, first_seen timestamptz, last_seen timestamptz,
               created_xid xid8, merged_xid xid8, tcp_flags smallint, sampling_rate int,
               sampled boolean, sampling_mixed boolean)
AS 'MODULE_PATHNAME', 'shardlog_unpack_flow'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE ROWS 1000;
