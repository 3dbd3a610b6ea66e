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
