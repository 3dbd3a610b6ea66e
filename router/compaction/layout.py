"""The SQL source of an owner-day by its layout (docs/architecture.md, "Reading a compacted
owner-day"). A heap day is read as it always was; a compacted one is its late heap rows (those
the compaction's snapshot did not see) and its segments, unpacked by the shardlog_segments
extension. Every statement builder takes its tables through here. Pure: no I/O.

Unpacked rows come out of ``shardlog_unpack_audit`` (``shardlog_unpack_flow``) with the day
table's column names and the segment table's columns share none of them, so a condition or a
select list written for the heap reads the same over ``segments s CROSS JOIN LATERAL
shardlog_unpack_audit(s.block) u``. A flow segment's bounds are (first_seen, id), its rows in
that order."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from router.db.names import DayTable
from router.search.cursor import Position

Add = Callable[[Any], str]

# The columns of a day table, in its order (router/db/ddl.py), as its unpack gives them.
AUDIT_TABLE_COLUMNS = "id, ts, content, attrs, created_xid"
FLOW_TABLE_COLUMNS = (
    "id, src_ip, dst_ip, src_port, dst_port, ip_version, proto, bytes, packets, flow_count, "
    "first_seen, last_seen, created_xid, merged_xid, tcp_flags, sampling_rate, sampled, "
    "sampling_mixed"
)


def table_columns(table: DayTable) -> str:
    return AUDIT_TABLE_COLUMNS if table.kind == "audit" else FLOW_TABLE_COLUMNS


def unpacked_columns(table: DayTable) -> str:
    """The day table's columns, taken from the unpacked rows (``u``)."""
    return ", ".join(f"u.{column.strip()}" for column in table_columns(table).split(","))


def snapshot(table: DayTable) -> str:
    """The snapshot the owner-day's segments were packed under, read in the statement itself
    (the shard's compacted_days)."""
    return (
        f"(SELECT snapshot FROM compacted_days WHERE kind = '{table.kind}' "
        f"AND owner_id = {int(table.owner_id)} AND day = DATE '{table.day.isoformat()}')"
    )


def heap(table: DayTable, own_condition: str | None = None) -> str:
    """The owner-day's heap rows as a FROM item under its own table's name, with a day table's
    columns (``heap_rows``); its own table itself when that is all it is."""
    if not table.shared and own_condition is None:
        return table.quoted
    return f"({heap_rows(table, own_condition)}) AS {table.quoted}"


def heap_rows(table: DayTable, own_condition: str | None = None) -> str:
    """The owner-day's heap rows with a day table's columns: its own table's (those meeting
    ``own_condition``, when given: a compacted table's late rows) and, when it has rows in
    the shard's shared table of its day, those (docs/architecture.md, "Reading both
    layouts").

    The two are a UNION ALL whose branches have no WHERE of their own (each says which it is
    in a constant column): PostgreSQL flattens only such a union into one scan of both
    tables, pushes the reader's conditions and the owner's into each branch (folding them
    where the constant decides) and merges the branches' index scans in order under a
    page's LIMIT. A branch with a WHERE would be planned apart and sorted whole."""
    columns = table_columns(table)
    if not table.shared:
        return f"SELECT {columns} FROM {table.quoted} WHERE {own_condition or 'true'}"
    branches = [
        f"SELECT {columns}, owner_id, true AS shared FROM {table.shared_quoted}",
    ]
    if table.own:
        branches.insert(
            0,
            f"SELECT {columns}, {int(table.owner_id)}::bigint AS owner_id, false AS shared "
            f"FROM {table.quoted}",
        )
    where = f"owner_id = {int(table.owner_id)}"
    if own_condition is not None:
        where += f" AND (shared OR ({own_condition}))"
    if table.shared_compacted:
        # The shard-day's segments hold the rest (page_branch, count_branch, source).
        where += f" AND (NOT shared OR ({shared_late(table)}))"
    return f"SELECT {columns} FROM ({' UNION ALL '.join(branches)}) AS rows WHERE {where}"


def shared_snapshot(table: DayTable) -> str:
    """The snapshot a compacted shard-day's shared rows were packed under (the shard's
    compacted_days row of owner id 0)."""
    return (
        f"(SELECT snapshot FROM compacted_days WHERE kind = '{table.kind}' "
        f"AND owner_id = 0 AND day = DATE '{table.day.isoformat()}')"
    )


def shared_late(table: DayTable) -> str:
    """The shared table's rows that a compacted shard-day's segments do not hold."""
    return (
        f"created_xid IS NOT NULL AND NOT pg_visible_in_snapshot(created_xid, "
        f"{shared_snapshot(table)})"
    )


def shared_owner_at() -> str:
    """The owner of an unpacked row (``u``) of a shared segment (``s``): its 2-byte index
    into the segment's owners."""
    return (
        "s.owners[get_byte(s.owner_of, 2 * (u.ord - 1)) * 256 "
        "+ get_byte(s.owner_of, 2 * u.ord - 1) + 1]"
    )


def shared_segments(table: DayTable, window: tuple[str, str] | None = None) -> str:
    """The shard-day's shared segments, each row unpacked (``s``, ``u``; bounded by
    ``window`` as ``segments``)."""
    bounds = "" if window is None else f", {window[0]}, {window[1]}"
    return (
        f"{table.shared_segments} AS s "
        f"CROSS JOIN LATERAL shardlog_unpack_audit(s.block{bounds}) AS u"
    )


def shared_holding(owner_id: int) -> str:
    """Shared segments that hold rows of the owner (the GIN index on owners)."""
    return f"s.owners @> ARRAY[{int(owner_id)}::bigint]"


def shared_owned(owner_id: int) -> str:
    """Shared segments holding the owner's rows, and of their rows the owner's."""
    return f"{shared_holding(owner_id)} AND {shared_owner_at()} = {int(owner_id)}"


def late(table: DayTable) -> str:
    """The heap rows of a compacted owner-day that its segments do not hold: written after the
    snapshot they were packed under. NULL created_xid: a row older than any snapshot. A flow
    row merged into after it too: the merge moved it out of its segment first
    (router/compaction/unfold.py)."""
    written = _after_snapshot(table, "created_xid")
    if table.kind == "audit":
        return written
    return f"(({written}) OR ({_after_snapshot(table, 'merged_xid')}))"


def _after_snapshot(table: DayTable, column: str) -> str:
    return f"{column} IS NOT NULL AND NOT pg_visible_in_snapshot({column}, {snapshot(table)})"


def segments(table: DayTable, window: tuple[str, str] | None = None) -> str:
    """The owner's segments of the day, each row unpacked (``s``: the segment, ``u``: the row);
    with ``window`` (SQL expressions), only each segment's rows with start <= ts < end are
    built (extension 1.1: the others are stepped over). A flow segment is unpacked whole (the
    extension has no bounded flow unpack): its rows outside the window are built, then
    filtered out by the reader's condition."""
    if table.kind == "flow":
        return f"{table.segments} AS s CROSS JOIN LATERAL shardlog_unpack_flow(s.block) AS u"
    bounds = "" if window is None else f", {window[0]}, {window[1]}"
    return f"{table.segments} AS s CROSS JOIN LATERAL shardlog_unpack_audit(s.block{bounds}) AS u"


def owned(table: DayTable) -> str:
    return f"s.owner_id = {int(table.owner_id)}"


def overlapping(start: str, end: str) -> str:
    """Segments that may hold a row with ``start`` <= ts < ``end`` (SQL expressions)."""
    return f"s.last_ts >= {start} AND s.first_ts < {end}"


def inside(start: str, end: str) -> str:
    """Segments whose rows all have ``start`` <= ts < ``end``."""
    return f"s.first_ts >= {start} AND s.last_ts < {end}"


def may_contain(patterns: tuple[str, ...] | list[str], add: Add) -> str:
    """Segments whose trigram filter does not rule out any of the substring patterns."""
    return " AND ".join(f"shardlog_may_contain(s.grams, {add(p)})" for p in patterns) or "true"


def segment_keyset(
    after: Position | None, shard: str, owner_id: int, descending: bool, add: Add
) -> str:
    """sql.keyset folded onto a segment's bounds: segments that may hold a row after ``after``
    (before it when descending)."""
    if after is None:
        return "true"
    ts = add(after.ts)
    bound = "s.first" if descending else "s.last"
    forward = "<" if descending else ">"
    if (shard, owner_id) == (after.shard, after.owner_id):
        return f"({bound}_ts, {bound}_id) {forward} ({ts}, {add(after.id)})"
    table_is_later = ((shard, owner_id) > (after.shard, after.owner_id)) != descending
    return f"{bound}_ts {forward}= {ts}" if table_is_later else f"{bound}_ts {forward} {ts}"


def page_branch(
    table: DayTable,
    select: str,
    condition: str,
    order: str,
    cap: str,
    segments_where: Callable[[], tuple[str, tuple[str, str]]],
    shared_where: Callable[[], tuple[str, tuple[str, str]]] | None = None,
) -> str:
    """One table's branch of a page: its first ``cap`` rows that meet ``condition`` in
    ``order`` ("ts ASC, id ASC" or the DESC twin), with its owner id. A compacted owner-day:
    the late heap rows and the segments (``segments_where()``: which may hold a row of the
    page, and the ts range whose rows the unpack builds), read in segment order and each
    segment's rows in stored order, which is (ts, id) order, so the page stops unpacking
    once it is full. Rows in a compacted shard-day's shared segments likewise
    (``shared_where()``), the owner's rows of each segment in (ts, owner id, id) order, which
    for one owner is (ts, id) order. ``select`` names the row's instant ts (a flow's
    first_seen AS ts): the branches' union is ordered by it."""
    owner = f"{int(table.owner_id)}::bigint AS owner_id"
    if not table.compacted and not table.shared_compacted:
        return (
            f"(SELECT {select}, {owner} FROM {heap(table)} WHERE {condition} "
            f"ORDER BY {order} LIMIT {cap})"
        )
    direction = "DESC" if order.endswith("DESC") else "ASC"
    in_order = f"ORDER BY s.seq {direction}, u.ord {direction} LIMIT {cap}"
    rows = (
        f"SELECT {select}, {owner} FROM {heap(table, late(table) if table.compacted else None)} "
        f"WHERE {condition}"
    )
    parts = [f"({rows} ORDER BY {order} LIMIT {cap})"]
    if table.compacted:
        which, window = segments_where()
        parts.append(
            f"(SELECT {select}, {owner} FROM {segments(table, window)} "
            f"WHERE {owned(table)} AND {which} AND {condition} {in_order})"
        )
    if table.shared_compacted:
        assert shared_where is not None
        which, window = shared_where()
        parts.append(
            f"(SELECT {select}, {owner} FROM {shared_segments(table, window)} "
            f"WHERE {shared_owned(table.owner_id)} AND {which} AND {condition} {in_order})"
        )
    return (
        f"(SELECT * FROM ({' UNION ALL '.join(parts)}) AS compacted "
        f"ORDER BY ts {direction}, id {direction} LIMIT {cap})"
    )


def count_branch(
    table: DayTable,
    condition: str,
    window: tuple[str, str] = ("", ""),
    candidates: str = "true",
    unconditional: bool = False,
) -> str:
    """One table's count of the rows that meet ``condition`` (one or more SELECTs of one
    bigint ``n``, joined by UNION ALL). A compacted owner-day: its late heap rows, and its
    segments that overlap ``window`` (SQL expressions) and are ``candidates``; when the
    condition is the window alone (``unconditional``), the segments wholly inside it count by
    their ``rows`` without being opened. A compacted shard-day's shared segments holding the
    owner are opened and its rows counted."""
    if not table.compacted and not table.shared_compacted:
        return f"SELECT count(*) AS n FROM {heap(table)} WHERE {condition}"
    start, end = window
    heap_rows_of = heap(table, late(table) if table.compacted else None)
    branches = [f"SELECT count(*) AS n FROM {heap_rows_of} WHERE {condition}"]
    if table.compacted:
        opened = f"{owned(table)} AND {overlapping(start, end)}"
        if unconditional:
            branches.append(
                f"SELECT coalesce(sum(s.rows), 0)::bigint FROM {table.segments} AS s "
                f"WHERE {owned(table)} AND {inside(start, end)}"
            )
            opened += f" AND NOT ({inside(start, end)})"
        branches.append(
            f"SELECT count(*) FROM {segments(table, window)} "
            f"WHERE {opened} AND {candidates} AND {condition}"
        )
    if table.shared_compacted:
        branches.append(
            f"SELECT count(*) FROM {shared_segments(table, window)} "
            f"WHERE {shared_owned(table.owner_id)} AND {overlapping(start, end)} "
            f"AND {candidates} AND {condition}"
        )
    return " UNION ALL ".join(branches)


def source(table: DayTable, window: tuple[str, str] | None = None) -> str:
    """A FROM item of every row of the table with the day table's columns, under the table's
    own name: the table itself, or for a compacted owner-day its late heap rows and its
    unpacked segments (those overlapping ``window``, SQL expressions, when given), and for a
    compacted shard-day the owner's rows of its shared segments."""
    if not table.compacted and not table.shared_compacted:
        return heap(table)
    bounds = "" if window is None else f" AND {overlapping(*window)}"
    parts = [heap_rows(table, late(table) if table.compacted else None)]
    if table.compacted:
        parts.append(
            f"SELECT {unpacked_columns(table)} "
            f"FROM {segments(table, window)} WHERE {owned(table)}{bounds}"
        )
    if table.shared_compacted:
        parts.append(
            f"SELECT {unpacked_columns(table)} FROM {shared_segments(table, window)} "
            f"WHERE {shared_owned(table.owner_id)}{bounds}"
        )
    return f"({' UNION ALL '.join(parts)}) AS {table.quoted}"


def timestamp(value: datetime) -> str:
    """A timestamptz constant, for statements that take no parameters."""
    return f"TIMESTAMPTZ '{value.isoformat()}'"
