"""The SQL of compacting one owner-day on its shard (docs/architecture.md, "Compacted days"):
the day's segment table, the copy of the heap's rows into segments under one snapshot with
its verification, the owner-day's view, and the clearing of the heap rows that snapshot saw.
Identifiers come from db.names; values travel as parameters."""

from __future__ import annotations

from router.compaction import layout
from router.db import roles
from router.db.names import DayTable

# A row's canonical text, hashed to 64 bits: what the copy's verification sums on both sides
# (sum() of bigint is already an exact numeric, summed in 128-bit integers: no cast needed).
_ROW_HASH = "hashtextextended(format('%s|%s|%s|%s|%s', id, ts, content, attrs, created_xid), 0)"


def storage_ddl(segments: str) -> list[str]:
    """How a segment table stores its columns. Blocks are zstd frames already: TOAST keeps
    them out of line, never compressed again. Filters stay in the row (a few kB, a few rows a
    page): each probe of a segment's filter would otherwise be a TOAST index lookup, which
    costed a page about a third of its time (bench/storage)."""
    return [
        f"ALTER TABLE {segments} ALTER COLUMN block SET STORAGE EXTERNAL",
        f"ALTER TABLE {segments} ALTER COLUMN grams SET STORAGE MAIN",
    ]


def segment_table_ddl(table: DayTable) -> list[str]:
    """The segment table of ``table``'s shard, kind and day (run as shardlog_tables)."""
    return [
        f"CREATE TABLE IF NOT EXISTS {table.segments} ("
        "owner_id bigint NOT NULL, seq integer NOT NULL, "
        "first_ts timestamptz NOT NULL, first_id bigint NOT NULL, "
        "last_ts timestamptz NOT NULL, last_id bigint NOT NULL, "
        "rows integer NOT NULL, grams bytea NOT NULL, block bytea NOT NULL, "
        "PRIMARY KEY (owner_id, seq))",
        *storage_ddl(table.segments),
        f"GRANT SELECT ON {table.segments} TO {roles.READER}, {roles.RETENTION}",
    ]


def copy_sql(table: DayTable) -> str:
    """The owner-day's segments from every heap row the transaction sees, in (ts, id) order,
    cut at $2 rows and at $3 bytes of content: a row opens a new segment when either count
    passes a multiple of its limit. $1: the owner id, $4: the zstd level. Each column is
    aggregated once in that order; a segment's bounds are its arrays' first and last items."""
    ordered = "ORDER BY ts, id"
    return f"""
        INSERT INTO {table.segments}
            (owner_id, seq, first_ts, first_id, last_ts, last_id, rows, grams, block)
        SELECT $1, seq, tss[1], ids[1], tss[cardinality(tss)], ids[cardinality(ids)],
            cardinality(ids), shardlog_grams(contents),
            shardlog_pack_audit(ids, tss, contents, attrs, xids, $4)
        FROM (
            SELECT seq, array_agg(id {ordered}) AS ids, array_agg(ts {ordered}) AS tss,
                array_agg(content {ordered}) AS contents, array_agg(attrs {ordered}) AS attrs,
                array_agg(created_xid {ordered}) AS xids
            FROM (
                SELECT *, dense_rank() OVER (ORDER BY by_rows, by_bytes) - 1 AS seq
                FROM (
                    SELECT id, ts, content, attrs, created_xid,
                        (row_number() OVER w - 1) / $2 AS by_rows,
                        (sum(octet_length(content)) OVER w - octet_length(content)) / $3
                            AS by_bytes
                    FROM {table.quoted} WINDOW w AS ({ordered})
                ) AS cut
            ) AS numbered
            GROUP BY seq
        ) AS packed"""


def record_sql(table: DayTable) -> str:
    """The compacted_days row of the owner-day: the transaction's snapshot, what it packed
    and the heap's count and checksum. $1: the owner id, $2: the day."""
    return f"""
        INSERT INTO compacted_days
            (kind, owner_id, day, snapshot, segments, rows, checksum, heap_bytes, packed_bytes)
        SELECT '{table.kind}', $1, $2, pg_current_snapshot(),
            (SELECT count(*) FROM {table.segments} WHERE owner_id = $1),
            heap.n, heap.checksum, pg_total_relation_size('{table.name}'::regclass),
            (SELECT coalesce(sum(pg_column_size(block) + pg_column_size(grams)), 0)
             FROM {table.segments} WHERE owner_id = $1)
        FROM (SELECT count(*) AS n, coalesce(sum({_ROW_HASH}), 0) AS checksum
              FROM {table.quoted}) AS heap"""


def verify_sql(table: DayTable) -> str:
    """The rows and checksum of the owner-day's unpacked segments. $1: the owner id."""
    return (
        f"SELECT count(*) AS n, coalesce(sum({_ROW_HASH}), 0) AS checksum "
        f"FROM {table.segments} AS s CROSS JOIN LATERAL shardlog_unpack_audit(s.block) AS u "
        "WHERE s.owner_id = $1"
    )


def view_ddl(table: DayTable) -> str:
    """The owner-day's view (run as shardlog_tables): its late heap rows and its unpacked
    segments, with the day table's columns in its order. The coordinator's foreign table of
    the owner-day reads it once the day is switched."""
    columns = layout.AUDIT_TABLE_COLUMNS
    return (
        f"CREATE OR REPLACE VIEW {table.all_view} AS "
        f"SELECT {columns} FROM {table.quoted} WHERE {layout.late(table)} "
        f"UNION ALL SELECT {', '.join(f'u.{c.strip()}' for c in columns.split(','))} "
        f"FROM {layout.segments(table)} WHERE {layout.owned(table)}"
    )


def view_grant(table: DayTable) -> str:
    return f"GRANT SELECT ON {table.all_view} TO {roles.READER}, {roles.RETENTION}"


def late_rows_sql(table: DayTable) -> str:
    """Whether the heap holds rows the compaction's snapshot did not see."""
    return f"SELECT EXISTS (SELECT 1 FROM {table.quoted} WHERE {layout.late(table)})"


def clear_sql(table: DayTable, late_rows: bool) -> str:
    """The heap rows the snapshot saw removed: all of them at once when there are no others."""
    if not late_rows:
        return f"TRUNCATE {table.quoted}"
    return f"DELETE FROM {table.quoted} WHERE NOT ({layout.late(table)})"
