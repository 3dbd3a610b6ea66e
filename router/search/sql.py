"""The query a shard runs for a page: a UNION ALL over the shard's day tables in range (of
every owner the search covers), each branch ordered by its (ts, id) index and cut at LIMIT, with
the keyset condition that continues after the cursor. Values travel as parameters; identifiers
come from db.names."""

from __future__ import annotations

import functools
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from router.compaction import layout, literals
from router.db import ddl
from router.db.names import DayTable, Reach
from router.search.cursor import Position
from router.search.query import AuditQuery, FlowQuery, IpFilter, PortFilter
from router.search.snapshot import ShardSnapshot

AUDIT_COLUMNS = "ts, id, content, attrs"
FLOW_COLUMNS = (
    "first_seen AS ts, id, src_ip, dst_ip, src_port, dst_port, ip_version, proto, "
    f"bytes, packets, flow_count, last_seen, {', '.join(ddl.FLOW_EXPORT_READ_COLUMNS)}"
)

# The column of a shard-day's rows that holds each row's owner's key (the shard's mirror's).
OWNER_KEY = "owner_key"

# A branch's columns over one day table, given Params.add (exports: the rendered line).
Columns = Callable[[DayTable, Callable[[Any], str]], str]


@dataclass
class Params:
    values: list[Any] = field(default_factory=list)

    def add(self, value: Any) -> str:
        self.values.append(value)
        return f"${len(self.values)}"


def keyset(
    after: Position | None,
    shard: str,
    owner_id: int,
    column: str,
    descending: bool,
    params: Params,
) -> str:
    """Rows of one day table (of ``owner_id`` on ``shard``) that come after ``after`` in
    (ts, shard, owner id, id) order (before it when descending). Shard and owner are one value
    per table, so the condition folds to ts and id, which the table's index serves."""
    if after is None:
        return "true"
    ts = params.add(after.ts)
    forward = "<" if descending else ">"
    if (shard, owner_id) == (after.shard, after.owner_id):
        return f"({column}, id) {forward} ({ts}, {params.add(after.id)})"
    # A table that comes later in the traversal than the cursor's on equal ts: its rows at the
    # cursor's ts still follow the cursor.
    table_is_later = ((shard, owner_id) > (after.shard, after.owner_id)) != descending
    return f"{column} {forward}= {ts}" if table_is_later else f"{column} {forward} {ts}"


def shard_day_keyset(
    after: Position | None, shard: str, column: str, descending: bool, params: Params
) -> str:
    """keyset for a shard-day branch, whose rows carry their owner: on the cursor's shard a row
    comparison on (ts, owner id, id), served by the shared table's (ts, owner_id, id) index;
    on another shard ts alone, as for a day table."""
    if after is None:
        return "true"
    ts = params.add(after.ts)
    forward = "<" if descending else ">"
    if shard == after.shard:
        owner, ident = params.add(after.owner_id), params.add(after.id)
        return f"({column}, owner_id, id) {forward} ({ts}, {owner}, {ident})"
    shard_is_later = (shard > after.shard) != descending
    return f"{column} {forward}= {ts}" if shard_is_later else f"{column} {forward} {ts}"


def _mirrored(kind: str, reach: Reach, alias: str, params: Params) -> list[str]:
    """The conditions on a mirror row (``alias``) of an owner ``reach`` covers, but its id."""
    parts = [f"{alias}.kind = {params.add(kind)}"]
    if reach.tenant is not None:
        parts.append(f"{alias}.tenant = {params.add(reach.tenant)}")
    if reach.prefixes:
        parts.append(
            f"EXISTS (SELECT 1 FROM unnest({params.add(list(reach.prefixes))}::text[]) AS p "
            f"WHERE starts_with({alias}.key, p))"
        )
    if reach.prefix is not None:
        parts.append(f"starts_with({alias}.key, {params.add(reach.prefix)})")
    if reach.reserved is not None:
        parts.append(f"NOT starts_with({alias}.key, {params.add(reach.reserved)})")
    return parts


def _gate(kind: str, reach: Reach, params: Params) -> str | None:
    """Whether the shard's mirror holds any owner ``reach`` covers at all: an uncorrelated
    EXISTS, which PostgreSQL runs once per statement (a one-time filter, through
    shard_owners_tenant), so a shard-day where the token reaches no one is not walked. None
    when the reach is every owner."""
    conditions = _mirrored(kind, reach, "g", params)
    if len(conditions) == 1:
        return None
    return f"EXISTS (SELECT 1 FROM shard_owners AS g WHERE {' AND '.join(conditions)})"


def reached(kind: str, reach: Reach, params: Params, owner: str = "s.owner_id") -> str:
    """The rows whose owner (the column ``owner``) the shard's mirror says ``reach`` covers: a
    probe of shard_owners' primary key per row (after ``_gate``). starts_with, not LIKE: a
    prefix is data."""
    probe = " AND ".join([*_mirrored(kind, reach, "o", params), f"o.owner_id = {owner}"])
    condition = f"EXISTS (SELECT 1 FROM shard_owners AS o WHERE {probe})"
    gate = _gate(kind, reach, params)
    if gate is not None:
        condition = f"{gate} AND {condition}"
    if reach.excluded:
        condition += f" AND {owner} <> ALL({params.add(list(reach.excluded))}::bigint[])"
    return condition


def shard_day_source(
    table: DayTable,
    params: Params,
    tag: str = OWNER_KEY,
    window: tuple[str, str] | None = None,
    packed: bool = True,
) -> str:
    """A shard-day as a FROM item under its shared table's name: the shared rows of the owners
    its reach covers (after ``_gate``), each with its owner's key (the shard's mirror's) as
    ``tag``. A join on the mirror's primary key: the planner walks the shared table's
    (ts, owner_id, id) index under a page's LIMIT, or each mirrored owner's (owner_id, ts, id)
    when the reach holds few owners on the shard. A compacted shard-day: the shared table's
    late rows, and (``packed``) its shared segments' rows (those of the segments overlapping
    ``window``, SQL expressions, when given)."""
    assert table.reach is not None
    reach = table.reach
    join = " AND ".join([*_mirrored(table.kind, reach, "o", params), "o.owner_id = s.owner_id"])
    if reach.excluded:
        join += f" AND s.owner_id <> ALL({params.add(list(reach.excluded))}::bigint[])"
    gate = _gate(table.kind, reach, params)
    late = layout.shared_late(table) if table.shared_compacted else None
    conditions = [c for c in (gate, late) if c]
    rows = (
        f"SELECT s.*, o.key AS {tag} FROM {table.shared_quoted} AS s "
        f"JOIN shard_owners AS o ON {join}"
        + (f" WHERE {' AND '.join(conditions)}" if conditions else "")
    )
    if table.shared_compacted and packed:
        which = "true" if window is None else layout.overlapping(*window)
        rows += f" UNION ALL {shard_day_segment_rows(table, params, tag, window, which)}"
    return f"({rows}) AS {table.shared_quoted}"


def shard_day_segment_rows(
    table: DayTable, params: Params, tag: str, window: tuple[str, str] | None, which: str
) -> str:
    """The rows of a compacted shard-day's shared segments that meet ``which`` (a condition on
    the segment, ``s``) of the owners its reach covers, with the shared table's columns and
    ``tag``."""
    join, conditions = _segment_owners(table, params, which)
    return (
        f"SELECT {layout.shared_owner_at()} AS owner_id, u.id, u.ts, u.content, u.attrs, "
        f"u.created_xid, o.key AS {tag} FROM {layout.shared_segments(table, window)} "
        f"JOIN shard_owners AS o ON {join} WHERE {conditions}"
    )


def shard_day_segment_page(
    table: DayTable,
    params: Params,
    select: str,
    where: str,
    which: str,
    window: tuple[str, str],
    direction: str,
    cap: str,
) -> str:
    """A page's branch of a compacted shard-day's shared segments: the first ``cap`` rows
    meeting ``where`` (``select`` of them, with the owner id) in (ts, owner id, id) order,
    which is the segments' ``seq`` order and each segment's stored order. The segments that
    meet ``which`` are walked in that order, each unpacked (rows in ``window``) and its first
    ``cap`` matches taken in a subquery of its own, so the page's sort is incremental on the
    segment and stops with the segment that fills it: a page of a shard-day of thousands of
    segments opens one or a few (a sort over every segment's rows would open them all)."""
    join, conditions = _segment_owners(table, params, which)
    rows = (
        f"SELECT {layout.shared_owner_at()} AS owner_id, u.id, u.ts, u.content, u.attrs, "
        f"u.created_xid, u.ord, o.key AS {OWNER_KEY} "
        f"FROM shardlog_unpack_audit(s.block, {window[0]}, {window[1]}) AS u "
        f"JOIN shard_owners AS o ON {join}"
    )
    segments = (
        f"SELECT s.seq, s.block, s.owners, s.owner_of FROM {table.shared_segments} AS s "
        f"WHERE {conditions} ORDER BY s.seq {direction}"
    )
    return (
        f"(SELECT {select}, owner_id FROM (SELECT s.seq AS segment, r.* FROM ({segments}) AS s "
        f"CROSS JOIN LATERAL (SELECT * FROM ({rows}) AS {table.shared_quoted} WHERE {where} "
        f"ORDER BY ord {direction} LIMIT {cap}) AS r) AS {table.shared_quoted} "
        f"ORDER BY segment {direction}, ord {direction} LIMIT {cap})"
    )


def _segment_owners(table: DayTable, params: Params, which: str) -> tuple[str, str]:
    """The join of a shared segment's unpacked row (``s``, ``u``) to its owner's mirror row
    (``o``) under the shard-day's reach, and the conditions on the segment (``which`` and
    the reach's gate)."""
    assert table.reach is not None
    reach = table.reach
    owner = layout.shared_owner_at()
    join = " AND ".join([*_mirrored(table.kind, reach, "o", params), f"o.owner_id = {owner}"])
    if reach.excluded:
        join += f" AND {owner} <> ALL({params.add(list(reach.excluded))}::bigint[])"
    gate = _gate(table.kind, reach, params)
    return join, " AND ".join(c for c in (which, gate) if c and c != "true") or "true"


def time_range(query: AuditQuery | FlowQuery, params: Params) -> str:
    column = "ts" if isinstance(query, AuditQuery) else "first_seen"
    return (
        f"{column} >= {params.add(query.window.start)} "
        f"AND {column} < {params.add(query.window.end)}"
    )


def _audit_matches(query: AuditQuery, params: Params) -> str:
    parts = []
    for pattern in query.patterns:
        value = params.add(pattern)
        if query.match == "substring":
            # Not LIKE: the planner would multiply LIKE selectivities of correlated patterns and
            # then sort the whole range instead of walking the (ts, id) index (docs/benchmarks.md).
            parts.append(f"strpos(content, {value}) > 0")
        elif query.match == "regex":
            parts.append(f"content ~ {value}")
        else:
            parts.append(f"content ~* {value}")
    return " AND ".join(parts) or "true"


def _ip(column: str, value: IpFilter, params: Params) -> str:
    placeholder = params.add(value.network)
    if value.exact:
        return f"{column} = {placeholder}::inet"
    return f"{column} <<= {placeholder}::inet"


def _port(column: str, value: PortFilter, params: Params) -> str:
    if value.low == value.high:
        return f"{column} = {params.add(value.low)}"
    return f"{column} BETWEEN {params.add(value.low)} AND {params.add(value.high)}"


def _direction(query: FlowQuery, params: Params, swap: bool) -> str:
    src, dst = ("dst", "src") if swap else ("src", "dst")
    parts = []
    if query.src_ip:
        parts.append(_ip(f"{src}_ip", query.src_ip, params))
    if query.dst_ip:
        parts.append(_ip(f"{dst}_ip", query.dst_ip, params))
    if query.src_port:
        parts.append(_port(f"{src}_port", query.src_port, params))
    if query.dst_port:
        parts.append(_port(f"{dst}_port", query.dst_port, params))
    return " AND ".join(parts) or "true"


def _flow_matches(query: FlowQuery, params: Params) -> str:
    parts = []
    if query.ip_version is not None:
        parts.append(f"ip_version = {params.add(query.ip_version)}")
    if query.proto is not None:
        parts.append(f"proto = {params.add(query.proto)}")
    forward = _direction(query, params, swap=False)
    if query.either_direction:
        parts.append(f"(({forward}) OR ({_direction(query, params, swap=True)}))")
    elif forward != "true":
        parts.append(forward)
    return " AND ".join(parts) or "true"


def matches(query: AuditQuery | FlowQuery, params: Params) -> str:
    """A query's condition besides its time range ("true" when none): also the live tail's."""
    if isinstance(query, AuditQuery):
        return _audit_matches(query, params)
    return _flow_matches(query, params)


def filter_parts(query: AuditQuery | FlowQuery, params: Params) -> tuple[str, str]:
    """(the time range, everything else) of a query's condition: apart for the estimate's
    sample, which counts both."""
    in_range = time_range(query, params)
    return in_range, matches(query, params)


def where(
    query: AuditQuery | FlowQuery, params: Params, pinned: ShardSnapshot | None = None
) -> str:
    in_range, matches = filter_parts(query, params)
    condition = in_range if matches == "true" else f"{in_range} AND {matches}"
    if pinned is None:
        return condition
    # NULL: a row from before rows recorded their transaction (schema/shard/0005), older than
    # any snapshot. The snapshot travels as text: asyncpg has no codec for pg_snapshot.
    snapshot = params.add(pinned.text())
    return (
        f"{condition} AND ({ddl.CREATED_XID} IS NULL OR "
        f"pg_visible_in_snapshot({ddl.CREATED_XID}, {snapshot}::text::pg_snapshot))"
    )


def page_sql(
    query: AuditQuery | FlowQuery,
    tables: list[DayTable],
    shard: str,
    after: Position | None,
    descending: bool,
    limit: int,
    pinned: ShardSnapshot | None = None,
    columns: Columns | None = None,
) -> tuple[str, list[Any]]:
    """The first ``limit`` rows after ``after`` of ``tables`` (of one shard, any owners), in
    (ts, owner id, id) order; each row carries its table's owner id. ``pinned``: only the rows
    the shard held in that snapshot (consistent=true). ``columns``: other columns than the
    search's (they must hold ts and id)."""
    params = Params()
    condition = where(query, params, pinned)
    column = "ts" if isinstance(query, AuditQuery) else "first_seen"
    select = columns or _search_columns(query)
    direction = "DESC" if descending else "ASC"
    cap = params.add(limit)
    branches = []
    order = f"{column} {direction}, id {direction}"
    for table in tables:
        columns_of_table = select(table, params.add)
        if table.shard_day:
            seek = shard_day_keyset(after, shard, column, descending, params)
            in_order = f"ORDER BY {column} {direction}, owner_id {direction}, id {direction}"
            rows = (
                f"(SELECT {columns_of_table}, owner_id "
                f"FROM {shard_day_source(table, params, packed=False)} "
                f"WHERE {condition} AND {seek} {in_order} LIMIT {cap})"
            )
            if table.shared_compacted:
                which, window = _shared_segments_of_page(query, after, descending, params)
                packed = shard_day_segment_page(
                    table, params, columns_of_table, f"{condition} AND {seek}", which, window,
                    direction, cap,
                )  # fmt: skip
                both = f"{rows} UNION ALL {packed}"
                rows = f"(SELECT * FROM ({both}) AS compacted {in_order} LIMIT {cap})"
            branches.append(rows)
            continue
        seek = keyset(after, shard, table.owner_id, column, descending, params)
        branches.append(
            layout.page_branch(
                table,
                columns_of_table,
                f"{condition} AND {seek}",
                order,
                cap,
                functools.partial(
                    _segments_of_page, query, table, shard, after, descending, params
                ),
                functools.partial(_shared_segments_of_page, query, after, descending, params),
            )
        )
    if len(branches) == 1:
        return branches[0][1:-1], params.values
    return (
        f"SELECT * FROM ({' UNION ALL '.join(branches)}) AS page "
        f"ORDER BY ts {direction}, owner_id {direction}, id {direction} LIMIT {cap}"
    ), params.values


def _segments_of_page(
    query: AuditQuery | FlowQuery,
    table: DayTable,
    shard: str,
    after: Position | None,
    descending: bool,
    params: Params,
) -> tuple[str, tuple[str, str]]:
    """The segments of a compacted owner-day that may hold a row of the page (in the window,
    after the cursor, not ruled out by a substring pattern's trigrams), and the ts range of
    their rows to unpack: the window, narrowed by the cursor (a later page does not build
    the rows before its cursor again)."""
    start, end = params.add(query.window.start), params.add(query.window.end)
    parts = [
        layout.overlapping(start, end),
        layout.segment_keyset(after, shard, table.owner_id, descending, params.add),
        _candidates(query, params),
    ]
    # A flow segment is unpacked whole (layout.segments): no range to narrow.
    if after is not None and table.kind == "audit":
        if descending:
            cursor = params.add(after.ts)
            end = f"LEAST({end}::timestamptz, {cursor}::timestamptz + interval '1 microsecond')"
        else:
            start = f"GREATEST({start}::timestamptz, {params.add(after.ts)}::timestamptz)"
    return " AND ".join(part for part in parts if part != "true") or "true", (start, end)


def _shared_segments_of_page(
    query: AuditQuery | FlowQuery, after: Position | None, descending: bool, params: Params
) -> tuple[str, tuple[str, str]]:
    """_segments_of_page for a compacted shard-day's shared segments, whose bounds are other
    owners' rows as often as not: the cursor folds onto them by ts alone (a segment whose last
    row is at the cursor's ts may still hold a later row of another owner or id)."""
    start, end = params.add(query.window.start), params.add(query.window.end)
    parts = [layout.overlapping(start, end), _candidates(query, params)]
    if after is not None:
        cursor = params.add(after.ts)
        if descending:
            parts.append(f"s.first_ts <= {cursor}")
            end = f"LEAST({end}::timestamptz, {cursor}::timestamptz + interval '1 microsecond')"
        else:
            parts.append(f"s.last_ts >= {cursor}")
            start = f"GREATEST({start}::timestamptz, {cursor}::timestamptz)"
    return " AND ".join(part for part in parts if part != "true") or "true", (start, end)


def _candidates(query: AuditQuery | FlowQuery, params: Params) -> str:
    """Segments a query's patterns do not rule out: by each substring, or by the substrings
    every match of each regular expression contains (router/compaction/literals.py)."""
    if not isinstance(query, AuditQuery):
        return "true"
    if query.match == "substring":
        return layout.may_contain(query.patterns, params.add)
    required = [
        literal
        for pattern in query.patterns
        for literal in literals.required_literals(pattern)
        if len(literal.encode()) >= literals.FILTERED_BYTES
    ]
    return layout.may_contain(required, params.add)


def _window_of(
    query: AuditQuery | FlowQuery, table: DayTable, params: Params
) -> tuple[str, str] | None:
    """The window's bounds as parameters, for a compacted table's segments alone (a heap
    table's statement keeps its parameters)."""
    if not table.compacted and not table.shared_compacted:
        return None
    return params.add(query.window.start), params.add(query.window.end)


def _search_columns(query: AuditQuery | FlowQuery) -> Columns:
    columns = AUDIT_COLUMNS if isinstance(query, AuditQuery) else FLOW_COLUMNS
    return lambda _table, _add: columns


def export_sql(
    query: AuditQuery | FlowQuery,
    tables: list[DayTable],
    descending: bool,
    columns: Columns,
    output: str = "*",
) -> tuple[str, list[Any]]:
    """Every match on one shard in (ts, owner id, id) order, each row with its owner's id
    last: one statement whose order the planner takes from the tables' (ts, id) indexes (a
    Merge Append), read through a cursor. ``columns`` as in page_sql (they must hold ts and
    id); ``output``: those the statement answers with."""
    params = Params()
    condition = where(query, params)
    select = columns
    direction = "DESC" if descending else "ASC"
    branches = []
    for table in tables:
        columns_of_table = select(table, params.add)
        if table.shard_day:
            bounds = _window_of(query, table, params)
            branches.append(
                f"SELECT {columns_of_table}, owner_id "
                f"FROM {shard_day_source(table, params, window=bounds)} WHERE {condition}"
            )
            continue
        owner = params.add(table.owner_id)
        window = _window_of(query, table, params)
        branches.append(
            f"SELECT {columns_of_table}, {owner}::bigint AS owner_id "
            f"FROM {layout.source(table, window)} WHERE {condition}"
        )
    return (
        f"SELECT {output} FROM ({' UNION ALL '.join(branches)}) AS rows "
        f"ORDER BY ts {direction}, owner_id {direction}, id {direction}"
    ), params.values


def count_sql(
    query: AuditQuery | FlowQuery, tables: list[DayTable], pinned: ShardSnapshot | None = None
) -> tuple[str, list[Any]]:
    params = Params()
    condition = where(query, params, pinned)
    unconditional = pinned is None and matches(query, Params()) == "true"
    branches = [_count_branch(query, table, condition, unconditional, params) for table in tables]
    return f"SELECT sum(n)::bigint FROM ({' UNION ALL '.join(branches)}) AS counts", params.values


def _count_branch(
    query: AuditQuery | FlowQuery,
    table: DayTable,
    condition: str,
    unconditional: bool,
    params: Params,
) -> str:
    if table.shard_day:
        window = _window_of(query, table, params)
        return (
            f"SELECT count(*) AS n FROM {shard_day_source(table, params, window=window)} "
            f"WHERE {condition}"
        )
    if not table.compacted and not table.shared_compacted:
        return layout.count_branch(table, condition)
    window = params.add(query.window.start), params.add(query.window.end)
    return layout.count_branch(table, condition, window, _candidates(query, params), unconditional)


def estimate_sql(query: AuditQuery | FlowQuery, tables: list[DayTable]) -> tuple[str, list[Any]]:
    """EXPLAIN of the matching rows: the planner's row estimate, no rows read."""
    params = Params()
    condition = where(query, params)
    branches = [f"SELECT 1 FROM {table.quoted} WHERE {condition}" for table in tables]
    return f"EXPLAIN (FORMAT JSON) {' UNION ALL '.join(branches)}", params.values


def stale_statistics_sql(tables: list[DayTable]) -> tuple[str, list[Any]]:
    """The names of the tables whose statistics the planner cannot go by: never analyzed (a
    table written a moment ago: its range selectivity is a fixed guess), or written since by
    more rows than it held when it was (router/search/estimate.py)."""
    params = Params()
    names = params.add([table.quoted for table in tables])
    return (
        "SELECT c.relname FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid "
        f"WHERE c.oid = ANY (SELECT to_regclass(n) FROM unnest({names}::text[]) AS n) "
        "AND (c.reltuples < 0 OR s.n_mod_since_analyze > c.reltuples)",
        params.values,
    )


def table_seed(table: DayTable) -> int:
    """A REPEATABLE seed of its own for each day table, the same for every estimate: pages of
    equal number in two tables are not drawn together, and one query's estimate is stable."""
    return zlib.crc32(table.name.encode())


# estimate.PageSums, in its order: sums over the sampled pages of per-page counts.
_PAGE_SUMS = ", ".join(
    f"coalesce(sum({expression}), 0)::float8 AS {name}"
    for name, expression in (
        ("hits", "p.h"),
        ("hits_sq", "p.h * p.h"),
        ("in_range", "p.r"),
        ("in_range_sq", "p.r * p.r"),
        ("cross_sum", "p.h * p.r"),
    )
)


def range_estimate_sql(
    query: AuditQuery | FlowQuery, tables: list[DayTable]
) -> tuple[str, list[Any]]:
    """EXPLAIN of the rows in the time range alone: the planner's row estimate, no rows read."""
    params = Params()
    in_range = time_range(query, params)
    branches = [f"SELECT 1 FROM {table.quoted} WHERE {in_range}" for table in tables]
    return f"EXPLAIN (FORMAT JSON) {' UNION ALL '.join(branches)}", params.values


def audit_sample_sql(
    query: AuditQuery, tables: list[DayTable], fraction: float, min_pages: int
) -> tuple[str, list[Any]]:
    """One row per day table from a TABLESAMPLE SYSTEM of ``fraction`` of its pages (at least
    ``min_pages``, all of a smaller table): the table's pages, the percentage drawn, the pages
    read, and sums over them of each page's matching rows (h) and rows in the range (r), of
    their squares and of their product, and the rows read (router/search/estimate.py). A
    larger fraction with the same seed draws a superset of the pages."""
    params = Params()
    in_range, matches = filter_parts(query, params)
    percent = params.add(fraction * 100)
    floor = params.add(min_pages * 100)
    branches = []
    for table in tables:
        size = (
            f"pg_relation_size({params.add(table.quoted)}::regclass) "
            "/ current_setting('block_size')::int"
        )
        branches.append(
            f"SELECT z.pages, z.percent, count(p.n) AS pages_read, {_PAGE_SUMS}, "
            "coalesce(sum(p.n), 0)::bigint AS read "
            f"FROM (SELECT pages, least(100, greatest({percent}::float8, "
            f"{floor}::float8 / greatest(pages, 1))) AS percent "
            f"FROM (SELECT {size} AS pages) AS s) AS z "
            "LEFT JOIN LATERAL ("
            f"SELECT count(*) FILTER (WHERE {in_range} AND {matches}) AS h, "
            f"count(*) FILTER (WHERE {in_range}) AS r, count(*) AS n "
            f"FROM {table.quoted} TABLESAMPLE SYSTEM (z.percent) "
            f"REPEATABLE ({params.add(table_seed(table))}::float8) "
            "GROUP BY (ctid::text::point)[0]) AS p ON true "
            "GROUP BY z.pages, z.percent"
        )
    return " UNION ALL ".join(branches), params.values


def flow_sample_sql(
    query: FlowQuery, tables: list[DayTable], classes: int
) -> tuple[str, list[Any]]:
    """One row per day table from ``classes`` of the 256 sample classes of its rows, read by
    an index-only scan of the sample index (router/db/ddl.py): the rows that match and those in
    the range."""
    params = Params()
    in_range, matches = filter_parts(query, params)
    chosen = params.add([n * ddl.FLOW_SAMPLE_STRIDE for n in range(classes)])
    branches = [
        f"SELECT count(*) FILTER (WHERE {matches}) AS hits, count(*) AS in_range "
        f"FROM {table.quoted} WHERE {ddl.FLOW_SAMPLE_PREDICATE} "
        f"AND {ddl.FLOW_SAMPLE_KEY} = ANY({chosen}::bigint[]) AND {in_range}"
        for table in tables
    ]
    return " UNION ALL ".join(branches), params.values


def _fdw_columns(query: AuditQuery | FlowQuery) -> str:
    if isinstance(query, AuditQuery):
        return "p.ts, p.id, p.content, p.attrs"
    return (
        "p.first_seen AS ts, p.id, p.src_ip, p.dst_ip, p.src_port, p.dst_port, "
        "p.ip_version, p.proto, p.bytes, p.packets, p.flow_count, p.last_seen, "
        + ", ".join(f"p.{name}" for name in ddl.FLOW_EXPORT_READ_COLUMNS)
    )


# Shard names sort as the router's merge sorts them (by code point), whatever the database's
# collation.
_SHARD = 'c.shard COLLATE "C"'


@dataclass(frozen=True)
class Coordinated:
    """What a coordinator query reads: the parents of owners with own tables in the window and,
    for owners with rows in shared tables (``shared_owners``), the kind's shared parent."""

    parents: list[str]
    shared_parent: str
    shared_owners: list[int]

    def sources(self, params: Params) -> list[tuple[str, str, str]]:
        """(FROM item, owner id column, own condition) per branch: an owner's parent holds its
        rows alone (fdw.children names the owner of each child); the shared parent's rows
        carry their owner, and the owners wanted travel as one parameter, which postgres_fdw
        sends to the shards with the time range."""
        branches = [(parent, "c.owner_id", "true") for parent in self.parents]
        if self.shared_owners:
            owners = params.add(self.shared_owners)
            branches.append(
                (self.shared_parent, "p.owner_id", f"p.owner_id = ANY({owners}::bigint[])")
            )
        return branches


def fdw_page_sql(
    query: AuditQuery | FlowQuery,
    sources: Coordinated,
    after: Position | None,
    descending: bool,
    limit: int,
) -> tuple[str, list[Any]]:
    """One query on the coordinator through the owners' parent tables and the shared parent;
    the shard of each row comes from fdw.children by the child it was read from, its owner from
    there too or from the shared row."""
    params = Params()
    condition = where(query, params)
    column = "ts" if isinstance(query, AuditQuery) else "first_seen"
    direction = "DESC" if descending else "ASC"

    seek = _fdw_seek(after, column, descending, params)
    branches = [
        f"SELECT {_fdw_columns(query)}, c.shard, {owner_column} AS owner_id FROM {parent} AS p "
        f"JOIN fdw.children AS c ON c.child = p.tableoid "
        f"WHERE {own} AND {condition} AND {seek(owner_column)}"
        for parent, owner_column, own in sources.sources(params)
    ]
    order = f'ts {direction}, shard COLLATE "C" {direction}, owner_id {direction}, id {direction}'
    return (
        f"SELECT * FROM ({' UNION ALL '.join(branches)}) AS page ORDER BY {order} "
        f"LIMIT {params.add(limit)}",
        params.values,
    )


def _fdw_seek(
    after: Position | None, column: str, descending: bool, params: Params
) -> Callable[[str], str]:
    """The keyset condition of a branch whose rows' owner id is ``owner column``."""
    if after is None:
        return lambda _owner_column: "true"
    ts, shard = params.add(after.ts), params.add(after.shard)
    owner, ident = params.add(after.owner_id), params.add(after.id)
    forward = "<" if descending else ">"
    # The ts bound alone is pushed down to the shards; the full row comparison is not.
    return lambda owner_column: (
        f"p.{column} {forward}= {ts} AND (p.{column}, {_SHARD}, {owner_column}, p.id) "
        f"{forward} ({ts}, {shard}, {owner}, {ident})"
    )


def fdw_count_sql(query: AuditQuery | FlowQuery, sources: Coordinated) -> tuple[str, list[Any]]:
    params = Params()
    condition = where(query, params)
    branches = [
        f"SELECT 1 FROM {parent} AS p WHERE {own} AND {condition}"
        for parent, _, own in sources.sources(params)
    ]
    return f"SELECT count(*) FROM ({' UNION ALL '.join(branches)}) AS matches", params.values
