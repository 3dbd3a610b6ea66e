"""The SQL of compacting a shard's shared table of one day (docs/architecture.md, "Compacting
shared days"): its shared segment table, the copy of its rows, many owners' to a segment, in
(ts, owner_id, id) order under one snapshot with its verification, the shard-day's view, and
the clearing of the rows that snapshot saw. Audit only (flows are not written shared).
Identifiers come from db.names; values travel as parameters."""

from __future__ import annotations

from router.compaction import layout, statements
from router.db import roles
from router.db.names import DayTable, quote_ident, shared_all_view

_ORDER = "ORDER BY ts, owner_id, id"
# A row's hash over the shared table's columns, each by its type's own hash.
_ROW_HASH = "hash_record_extended(ROW(owner_id, id, ts, content, attrs, created_xid), 0)::numeric"


def table_ddl(table: DayTable) -> list[str]:
    """The shared segment table of ``table``'s shard-day (run as shardlog_tables)."""
    segments = table.shared_segments
    owners_index = quote_ident(f"{segments.strip(chr(34))}_owners")
    return [
        f"CREATE TABLE IF NOT EXISTS {segments} ("
        "seq integer PRIMARY KEY, "
        "first_ts timestamptz NOT NULL, first_owner bigint NOT NULL, first_id bigint NOT NULL, "
        "last_ts timestamptz NOT NULL, last_owner bigint NOT NULL, last_id bigint NOT NULL, "
        "rows integer NOT NULL, owners bigint[] NOT NULL, owner_of bytea NOT NULL, "
        "grams bytea NOT NULL, block bytea NOT NULL)",
        *statements.storage_ddl(segments),
        f"CREATE INDEX IF NOT EXISTS {owners_index} ON {segments} USING gin (owners)",
        f"GRANT SELECT ON {segments} TO {roles.READER}, {roles.RETENTION}",
    ]


def copy_sql(table: DayTable) -> str:
    """The shard-day's segments from every shared row the transaction sees, in (ts, owner_id,
    id) order, cut at $1 rows and at $2 bytes of content (as an owner-day's); each with its
    distinct owners and each row's 2-byte index into them. $3: the zstd level."""
    arrays = ", ".join(
        f"array_agg({c} {_ORDER}) AS {c}"
        for c in ("owner_id", "id", "ts", "content", "attrs", "created_xid")
    )
    return f"""
        INSERT INTO {table.shared_segments} (seq, first_ts, first_owner, first_id, last_ts,
            last_owner, last_id, rows, owners, owner_of, grams, block)
        SELECT (row_number() OVER (ORDER BY by_rows, by_bytes) - 1)::integer,
            ts[1], owner_id[1], id[1], ts[n], owner_id[n], id[n], n, owners, owner_of,
            shardlog_grams(content), shardlog_pack_audit(id, ts, content, attrs, created_xid, $3)
        FROM (
            SELECT by_rows, by_bytes, count(*)::integer AS n, {arrays},
                array_agg(DISTINCT owner_id ORDER BY owner_id) AS owners,
                string_agg(substring(int4send(owner_index) FROM 3 FOR 2), ''::bytea {_ORDER})
                    AS owner_of
            FROM (
                SELECT cut.*, (dense_rank() OVER (PARTITION BY by_rows, by_bytes
                    ORDER BY owner_id) - 1)::integer AS owner_index
                FROM (
                    SELECT owner_id, id, ts, content, attrs, created_xid,
                        (row_number() OVER w - 1) / $1 AS by_rows,
                        (sum(octet_length(content)) OVER w - octet_length(content)) / $2
                            AS by_bytes
                    FROM {table.shared_quoted} WINDOW w AS ({_ORDER})
                ) AS cut
            ) AS ranked
            GROUP BY by_rows, by_bytes
        ) AS segment"""


def record_sql(table: DayTable) -> str:
    """The shard-day's compacted_days row (owner id 0): the transaction's snapshot, what it
    packed and the shared table's count and checksum. $1: the day."""
    segments = table.shared_segments
    return f"""
        INSERT INTO compacted_days
            (kind, owner_id, day, snapshot, segments, rows, checksum, heap_bytes, packed_bytes)
        SELECT '{table.kind}', 0, $1, pg_current_snapshot(),
            (SELECT count(*) FROM {segments}), heap.n, heap.checksum,
            pg_total_relation_size('{table.shared_quoted}'::regclass),
            (SELECT coalesce(sum(pg_column_size(block) + pg_column_size(grams)
                + pg_column_size(owners) + pg_column_size(owner_of)), 0) FROM {segments})
        FROM (SELECT count(*) AS n, coalesce(sum({_ROW_HASH}), 0) AS checksum
              FROM {table.shared_quoted}) AS heap
        RETURNING segments, rows, checksum, heap_bytes, packed_bytes"""


def _unpacked(table: DayTable) -> str:
    return (
        f"SELECT {layout.shared_owner_at()} AS owner_id, u.id, u.ts, u.content, u.attrs, "
        f"u.created_xid FROM {layout.shared_segments(table)}"
    )


def verify_sql(table: DayTable) -> str:
    """The rows and checksum of the shard-day's unpacked segments."""
    return (
        f"SELECT count(*) AS n, coalesce(sum({_ROW_HASH}), 0) AS checksum "
        f"FROM ({_unpacked(table)}) AS packed"
    )


def view_ddl(table: DayTable) -> list[str]:
    """The shard-day's view (run as shardlog_tables): its late shared rows and its unpacked
    segments, with the shared table's columns in its order; what the coordinator's child of
    the shard-day reads once it is switched."""
    view = shared_all_view(table.kind, table.day)
    return [
        f"CREATE OR REPLACE VIEW {view} AS "
        f"SELECT owner_id, id, ts, content, attrs, created_xid FROM {table.shared_quoted} "
        f"WHERE {layout.shared_late(table)} UNION ALL {_unpacked(table)}",
        f"GRANT SELECT ON {view} TO {roles.READER}, {roles.RETENTION}",
    ]


def late_rows_sql(table: DayTable) -> str:
    return f"SELECT EXISTS (SELECT 1 FROM {table.shared_quoted} WHERE {layout.shared_late(table)})"


def clear_sql(table: DayTable, late_rows: bool) -> str:
    """The shared rows the snapshot saw removed: all at once when there are no others."""
    if not late_rows:
        return f"TRUNCATE {table.shared_quoted}"
    return f"DELETE FROM {table.shared_quoted} WHERE NOT ({layout.shared_late(table)})"
