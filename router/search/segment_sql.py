"""The statement of count=estimate over a shard's compacted owner-days
(router/search/segment_estimate.py): one round trip that finds their candidate segments from
the segment metadata alone, decides how many to open from the rows they hold, opens those and
counts their matches. The condition on unpacked rows is count=exact's (sql.where); each
owner-day's segments are unpacked through router/compaction/layout.py."""

from __future__ import annotations

from typing import Any

from router.compaction import layout
from router.db.names import DayTable
from router.search import sql
from router.search.query import AuditQuery, FlowQuery
from router.search.snapshot import ShardSnapshot

Query = AuditQuery | FlowQuery


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


def sample_sql(
    query: Query,
    tables: list[DayTable],
    count_below_rows: int,
    sample_rows: int,
    pinned: ShardSnapshot | None = None,
) -> tuple[str, list[Any]]:
    """One row per compacted owner-day of ``tables`` (segment_estimate.OwnerDaySample): its
    matches counted, those of its opened segments, and the rows of its opened and unopened
    candidate segments. When the candidates of all ``tables`` hold at most
    ``count_below_rows`` rows every one is opened; otherwise the share f = ``sample_rows`` /
    their rows of each owner-day's n candidates: m = max(1, ceil(n f)), evenly spaced by
    ``seq``, the k-th (from 1) when floor(k m / n) > floor((k - 1) m / n)."""
    params = sql.Params()
    condition = sql.where(query, params, pinned)
    unconditional = pinned is None and sql.matches(query, sql.Params()) == "true"
    windows = [(params.add(query.window.start), params.add(query.window.end)) for _ in tables]
    candidates = " UNION ALL ".join(
        f"SELECT {n} AS t, s.seq, s.rows FROM {table.segments} AS s "
        f"WHERE {_opened(query, table, window, unconditional, params)}"
        for n, (table, window) in enumerate(zip(tables, windows, strict=True))
    )
    picked = _picked(candidates, params, count_below_rows, sample_rows)
    branches = []
    for n, (table, window) in enumerate(zip(tables, windows, strict=True)):
        inside = (
            f"(SELECT coalesce(sum(s.rows), 0) FROM {table.segments} AS s "
            f"WHERE {layout.owned(table)} AND {layout.inside(*window)})"
            if unconditional
            else "0"
        )
        hits = (
            f"(SELECT count(*) FROM {layout.segments(table, window)} WHERE {layout.owned(table)} "
            f"AND s.seq IN (SELECT p.seq FROM picked AS p WHERE p.t = {n} AND p.opened) "
            f"AND {condition})"
        )
        late = f"(SELECT count(*) FROM {layout.heap(table, layout.late(table))} WHERE {condition})"
        branches.append(_sample_row(n, late, inside, hits))
    return f"{picked} {' UNION ALL '.join(branches)}", params.values


def shared_sample_sql(
    query: AuditQuery,
    tables: list[DayTable],
    count_below_rows: int,
    sample_rows: int,
    pinned: ShardSnapshot | None = None,
) -> tuple[str, list[Any]]:
    """sample_sql's rows for the shared rows of ``tables`` in compacted shard-days
    (docs/architecture.md, "Compacting shared days"): an owner-day's (its late rows in the
    shared table, and its rows in the shard-day's segments that hold it) or a shard-day's
    (the late rows and the segments' rows of the owners its reach covers). Candidates are the
    segments in the window that the owners index and the trigram filter keep; a segment holds
    many owners' rows, so none counts by ``rows`` unopened (its rows are not all the reader's)
    and the extrapolation is over all its rows, which bounds the matches above all the same."""
    params = sql.Params()
    condition = sql.where(query, params, pinned)
    windows = [(params.add(query.window.start), params.add(query.window.end)) for _ in tables]
    filtered = (
        layout.may_contain(query.patterns, params.add)
        if query.match == "substring" and query.patterns
        else "true"
    )
    candidates = " UNION ALL ".join(
        f"SELECT {n} AS t, s.seq, s.rows FROM {table.shared_segments} AS s "
        f"WHERE {layout.overlapping(*window)} AND {filtered}"
        + ("" if table.shard_day else f" AND {layout.shared_holding(table.owner_id)}")
        for n, (table, window) in enumerate(zip(tables, windows, strict=True))
    )
    picked = _picked(candidates, params, count_below_rows, sample_rows)
    branches = []
    for n, (table, window) in enumerate(zip(tables, windows, strict=True)):
        opened = f"s.seq IN (SELECT p.seq FROM picked AS p WHERE p.t = {n} AND p.opened)"
        if table.shard_day:
            late_rows = sql.shard_day_source(table, params, packed=False)
            packed = sql.shard_day_segment_rows(table, params, sql.OWNER_KEY, window, opened)
            segment_rows = f"({packed}) AS {table.shared_quoted}"
        else:
            late_rows = layout.heap(table)
            segment_rows = (
                f"(SELECT {layout.unpacked_columns(table)} "
                f"FROM {layout.shared_segments(table, window)} "
                f"WHERE {layout.shared_owned(table.owner_id)} AND {opened}) AS {table.quoted}"
            )
        late = f"(SELECT count(*) FROM {late_rows} WHERE {condition})"
        hits = f"(SELECT count(*) FROM {segment_rows} WHERE {condition})"
        branches.append(_sample_row(n, late, "0", hits))
    return f"{picked} {' UNION ALL '.join(branches)}", params.values


def _sample_row(n: int, late: str, inside: str, hits: str) -> str:
    """One table's OwnerDaySample from its counts (scalar subqueries) and the picked
    segments."""
    rows = f"(SELECT coalesce(sum(p.rows), 0) FROM picked AS p WHERE p.t = {n} AND"
    return (
        f"SELECT (x.late + x.inside + x.hits)::bigint, x.hits::bigint, "
        f"{rows} p.opened)::bigint, {rows} NOT p.opened)::bigint "
        # OFFSET 0: x is not flattened into the select list, which would count hits twice.
        f"FROM (SELECT {late} AS late, {inside} AS inside, {hits} AS hits OFFSET 0) AS x"
    )


def _picked(candidates: str, params: sql.Params, count_below_rows: int, sample_rows: int) -> str:
    """The WITH clause that picks which ``candidates`` (t, seq, rows) to open (``picked``:
    each with ``opened``): all when they hold at most ``count_below_rows`` rows, else the
    share f = ``sample_rows`` / their rows of each table's n candidates, m = max(1, ceil(n f))
    evenly spaced by ``seq``, the k-th (from 1) when floor(k m / n) > floor((k - 1) m / n)."""
    below, sample = params.add(count_below_rows), params.add(float(sample_rows))
    return (
        f"WITH candidates AS ({candidates}), "
        "numbered AS (SELECT c.*, row_number() OVER (PARTITION BY c.t ORDER BY c.seq) AS k, "
        "count(*) OVER (PARTITION BY c.t) AS n FROM candidates AS c), "
        # Materialized: inlined into the join below it would be summed again for each row.
        "share AS MATERIALIZED (SELECT CASE "
        f"WHEN coalesce(sum(c.rows), 0) <= {below} THEN 1.0::float8 "
        f"ELSE least(1.0, {sample}::float8 / sum(c.rows)) END AS f FROM candidates AS c), "
        "picked AS (SELECT r.*, (r.k * m.m / r.n) > ((r.k - 1) * m.m / r.n) AS opened "
        "FROM numbered AS r, share, "
        "LATERAL (SELECT greatest(1, ceil(r.n * share.f))::bigint AS m) AS m)"
    )
