"""The statements of count=estimate over compacted owner-days (router/search/segment_estimate.py):
the rows of their candidate segments, read from the segment metadata alone, and a count of a
share of those candidates opened. The condition on unpacked rows is count=exact's
(sql.where), each owner-day's segments are unpacked through router/compaction/layout.py."""

from __future__ import annotations

from typing import Any

from router.compaction import layout
from router.db.names import DayTable
from router.search import sql
from router.search.query import AuditQuery, FlowQuery
from router.search.snapshot import ShardSnapshot

Query = AuditQuery | FlowQuery


def _window(query: Query, params: sql.Params) -> tuple[str, str]:
    return params.add(query.window.start), params.add(query.window.end)


def _opened(
    query: Query,
    table: DayTable,
    window: tuple[str, str],
    unconditional: bool,
    params: sql.Params,
) -> str:
    """The segments of ``table``'s owner-day that a count must open: in the ``window`` (SQL
    expressions), not ruled out by a substring pattern's trigrams, and (``unconditional``: the
    condition is the window alone) not wholly inside the window, which counts by ``rows``."""
    start, end = window
    parts = [layout.owned(table), layout.overlapping(start, end)]
    if isinstance(query, AuditQuery) and query.match == "substring" and query.patterns:
        parts.append(layout.may_contain(query.patterns, params.add))
    if unconditional:
        parts.append(f"NOT ({layout.inside(start, end)})")
    return " AND ".join(parts)


def _unconditional(query: Query, pinned: ShardSnapshot | None) -> bool:
    return pinned is None and sql.matches(query, sql.Params()) == "true"


def candidate_rows_sql(
    query: Query, tables: list[DayTable], pinned: ShardSnapshot | None = None
) -> tuple[str, list[Any]]:
    """The rows of the segments a count of ``tables`` (compacted owner-days of one shard)
    would open, summed: segment metadata alone, no block read."""
    params = sql.Params()
    unconditional = _unconditional(query, pinned)
    branches = [
        f"SELECT coalesce(sum(s.rows), 0)::bigint AS n FROM {table.segments} AS s "
        f"WHERE {_opened(query, table, _window(query, params), unconditional, params)}"
        for table in tables
    ]
    return f"SELECT sum(n)::bigint FROM ({' UNION ALL '.join(branches)}) AS candidates", (
        params.values
    )


def sample_sql(
    query: Query, tables: list[DayTable], share: float, pinned: ShardSnapshot | None = None
) -> tuple[str, list[Any]]:
    """One row per compacted owner-day of ``tables`` (segment_estimate.OwnerDaySample): its
    matches counted, those of its opened segments, and the rows of its opened and unopened
    candidates. Of its n candidates, m = max(1, ceil(n * ``share``)) are opened, evenly spaced
    by ``seq``: the k-th (from 1) when floor(k m / n) > floor((k - 1) m / n)."""
    params = sql.Params()
    condition = sql.where(query, params, pinned)
    unconditional = _unconditional(query, pinned)
    fraction = params.add(share)
    branches = []
    for table in tables:
        window = _window(query, params)
        inside = (
            f"(SELECT coalesce(sum(s.rows), 0) FROM {table.segments} AS s "
            f"WHERE {layout.owned(table)} AND {layout.inside(*window)})"
            if unconditional
            else "0"
        )
        branches.append(
            f"(WITH candidates AS (SELECT s.seq, s.rows, "
            "row_number() OVER (ORDER BY s.seq) AS k, count(*) OVER () AS n "
            f"FROM {table.segments} AS s "
            f"WHERE {_opened(query, table, window, unconditional, params)}), "
            "picked AS (SELECT c.*, (c.k * m.m / c.n) > ((c.k - 1) * m.m / c.n) AS opened "
            "FROM candidates AS c, "
            f"LATERAL (SELECT greatest(1, ceil(c.n * {fraction}::float8))::bigint AS m) AS m), "
            f"hits AS (SELECT count(*) AS n FROM {layout.segments(table)} "
            f"WHERE {layout.owned(table)} "
            f"AND s.seq IN (SELECT seq FROM picked WHERE opened) AND {condition}) "
            f"SELECT ((SELECT count(*) FROM {table.quoted} WHERE {condition} "
            f"AND {layout.late(table)}) + {inside} + (SELECT n FROM hits))::bigint AS counted, "
            "(SELECT n FROM hits)::bigint AS hits, "
            "(SELECT coalesce(sum(p.rows), 0) FROM picked AS p WHERE p.opened)::bigint "
            "AS opened_rows, "
            "(SELECT coalesce(sum(p.rows), 0) FROM picked AS p WHERE NOT p.opened)::bigint "
            "AS unopened_rows)"
        )
    return " UNION ALL ".join(branches), params.values
