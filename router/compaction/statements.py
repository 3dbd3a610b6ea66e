"""The SQL of compacting one owner-day on its shard (docs/architecture.md, "Compacted days"):
the day's segment table, the copy of the heap's rows into segments under one snapshot with
its verification, the owner-day's view, and the clearing of the heap rows that snapshot saw.
Identifiers come from db.names; values travel as parameters."""

from __future__ import annotations

from router.compaction import layout
from router.db import roles
from router.db.names import DayTable


def _row_hash(table: DayTable) -> str:
    """A row's hash over every column of the day table, each by its type's own hash (no text
    conversions: a third cheaper than hashing the row's text): what the copy's verification
    sums on both sides."""
    return f"hash_record_extended(ROW({layout.table_columns(table)}), 0)::numeric"


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


def copy_lock(table: DayTable) -> list[str]:
    """What the copy takes before its snapshot. A flow row may be merged into in place: a
    merge that committed after the snapshot but into a row the snapshot saw would leave the
    segment with the row's old counters. The SHARE lock waits for the merges under way and
    holds new ones until the copy commits; every merge after it then sees the copy and moves
    its rows out of the segments first (router/compaction/unfold.py)."""
    if table.kind == "audit":
        return []
    return [f"LOCK TABLE {table.quoted} IN SHARE MODE"]


def copy_sql(table: DayTable) -> str:
    """The owner-day's segments from every heap row the transaction sees, in (ts, id) order,
    cut at $2 rows and at $3 bytes of content: a row opens a new segment when either count
    passes a multiple of its limit. $1: the owner id, $4: the zstd level."""
    if table.kind == "flow":
        return _flow_copy_sql(table)
    return _insert_segments(
        table,
        "ts",
        ("id", "ts", "content", "attrs", "created_xid"),
        "(row_number() OVER w - 1) / $2 AS by_rows, "
        "(sum(octet_length(content)) OVER w - octet_length(content)) / $3 AS by_bytes",
        ("by_rows", "by_bytes"),
        "shardlog_grams(content)",
        "shardlog_pack_audit(id, ts, content, attrs, created_xid, $4)",
    )


def _insert_segments(
    table: DayTable,
    instant: str,
    columns: tuple[str, ...],
    cuts: str,
    parts: tuple[str, ...],
    grams: str,
    block: str,
) -> str:
    """A copy's INSERT: the heap read once in (``instant``, id) order, each row given its
    segment by ``cuts`` (window expressions naming ``parts``), every column aggregated once
    per segment into an array under its own name, in that order; a segment's bounds are its
    arrays' ends, ``grams`` and ``block`` are made of its arrays. Groups are hashed, not
    sorted: the aggregates' ORDER BY keeps each array in order (a presorted input costs
    PostgreSQL's sort one pass)."""
    ordered = f"ORDER BY {instant}, id"
    arrays = ", ".join(f"array_agg({c} {ordered}) AS {c}" for c in columns)
    part_list = ", ".join(parts)
    return f"""
        INSERT INTO {table.segments}
            (owner_id, seq, first_ts, first_id, last_ts, last_id, rows, grams, block)
        SELECT $1, (row_number() OVER (ORDER BY {part_list}) - 1)::integer,
            {instant}[1], id[1], {instant}[n], id[n], n, {grams}, {block}
        FROM (
            SELECT {part_list}, count(*)::integer AS n, {arrays}
            FROM (
                SELECT {", ".join(columns)}, {cuts}
                FROM {table.quoted} WINDOW w AS ({ordered})
            ) AS cut
            GROUP BY {part_list}
        ) AS segment"""


def copy_parameters(
    table: DayTable, segment_rows: int, segment_bytes: int, level: int
) -> tuple[int, ...]:
    """copy_sql's parameters."""
    if table.kind == "flow":
        return table.owner_id, segment_rows, level
    return table.owner_id, segment_rows, segment_bytes, level


def _flow_copy_sql(table: DayTable) -> str:
    """copy_sql of a flow owner-day: in (first_seen, id) order, cut at $2 rows (flows have no
    content); $3: the zstd level."""
    columns = tuple(c.strip() for c in layout.FLOW_TABLE_COLUMNS.split(","))
    return _insert_segments(
        table,
        "first_seen",
        columns,
        "(row_number() OVER w - 1) / $2 AS by_rows",
        ("by_rows",),
        "''::bytea",
        f"shardlog_pack_flow({', '.join(columns)}, $3)",
    )


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
        FROM (SELECT count(*) AS n, coalesce(sum({_row_hash(table)}), 0) AS checksum
              FROM {table.quoted}) AS heap
        RETURNING segments, rows, checksum, heap_bytes, packed_bytes"""


def verify_sql(table: DayTable) -> str:
    """The rows and checksum of the owner-day's unpacked segments. $1: the owner id."""
    return (
        f"SELECT count(*) AS n, coalesce(sum({_row_hash(table)}), 0) AS checksum "
        f"FROM {layout.segments(table)} WHERE s.owner_id = $1"
    )


def view_ddl(table: DayTable) -> str:
    """The owner-day's view (run as shardlog_tables): its late heap rows and its unpacked
    segments, with the day table's columns in its order. The coordinator's foreign table of
    the owner-day reads it once the day is switched."""
    return (
        f"CREATE OR REPLACE VIEW {table.all_view} AS "
        f"SELECT {layout.table_columns(table)} FROM {table.quoted} WHERE {layout.late(table)} "
        f"UNION ALL SELECT {layout.unpacked_columns(table)} "
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
        return truncate_sql([table])
    return f"DELETE FROM {table.quoted} WHERE NOT ({layout.late(table)})"


def truncate_sql(tables: list[DayTable]) -> str:
    """Heaps whose every row a copy saw, emptied in one statement."""
    return f"TRUNCATE {', '.join(table.quoted for table in tables)}"
