"""The statements of the live tail, on one shard, inside one REPEATABLE READ transaction whose
snapshot bounds what they see. Snapshots travel as text (asyncpg has no codec for
pg_snapshot); identifiers come from db.names, conditions from the search's SQL."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from router.compaction import layout
from router.db import ddl
from router.db.names import DayTable
from router.search import sql as search_sql
from router.search.cursor import Position
from router.search.query import AuditQuery, FlowQuery
from router.search.snapshot import ShardSnapshot

CURRENT_SNAPSHOT = "SELECT pg_current_snapshot()::text"


def _after(column: str, start: str) -> str:
    return f"NOT pg_visible_in_snapshot({column}, {start}::text::pg_snapshot)"


def log_sql(start: ShardSnapshot, until: ShardSnapshot | None) -> tuple[str, list[Any]]:
    """The tail log's lines of the transactions committed after ``start`` (and seen by
    ``until``, else by the transaction's own snapshot)."""
    params = search_sql.Params()
    since = params.add(start.text())
    condition = f"xid >= pg_snapshot_xmin({since}::text::pg_snapshot) AND {_after('xid', since)}"
    if until is not None:
        until_text = params.add(until.text())
        condition += f" AND pg_visible_in_snapshot(xid, {until_text}::text::pg_snapshot)"
    return (
        "SELECT table_name, owner_id, first_ts, last_ts, xid::text::bigint AS xid, logged_at "
        f"FROM tail_log WHERE {condition}",
        params.values,
    )


def _change(kind: str) -> str:
    if kind == "audit":
        return ddl.CREATED_XID
    return f"coalesce({ddl.MERGED_XID}, {ddl.CREATED_XID})"


def _merged(since: str) -> str:
    """A flow row merged into after ``since`` that existed before it (or before rows recorded
    their transaction)."""
    return (
        f"({ddl.MERGED_XID} IS NOT NULL AND coalesce(pg_visible_in_snapshot("
        f"{ddl.CREATED_XID}, {since}::text::pg_snapshot), true))"
    )


def rows_sql(
    table: DayTable,
    first_ts: datetime,
    last_ts: datetime,
    start: ShardSnapshot,
    filters: list[AuditQuery | FlowQuery | None],
) -> tuple[str, list[Any]]:
    """The rows of ``table`` between ``first_ts`` and ``last_ts`` written (inserted, or for
    flows merged into) after ``start`` and seen by the transaction's snapshot, with
    the change's transaction (``xid``), whether it was a merge into a row older than ``start``
    (``merged``), and per filter whether the row matches it (``m0``, ``m1`` ...; None: every
    row matches). Rows matching none of the filters are left on the shard."""
    params = search_sql.Params()
    change = _change(table.kind)
    since = params.add(start.text())
    time_column = "ts" if table.kind == "audit" else "first_seen"
    columns = search_sql.AUDIT_COLUMNS if table.kind == "audit" else search_sql.FLOW_COLUMNS
    merged = "false" if table.kind == "audit" else _merged(since)
    conditions = ["true" if f is None else search_sql.matches(f, params) for f in filters]
    flags = "".join(f", ({c}) AS m{n}" for n, c in enumerate(conditions))
    where = [
        f"{time_column} >= {params.add(first_ts)}",
        f"{time_column} <= {params.add(last_ts)}",
        _after(change, since),
    ]
    if "true" not in conditions:
        where.append("(" + " OR ".join(f"({c})" for c in conditions) + ")")
    return (
        f"SELECT {columns}, {change}::text::bigint AS xid, {merged} AS merged{flags} "
        f"FROM {layout.heap(table)} WHERE {' AND '.join(where)}",
        params.values,
    )


def prune_sql() -> str:
    """The tail log's lines older than $1 seconds (the housekeeping's)."""
    return "DELETE FROM tail_log WHERE logged_at < now() - make_interval(secs => $1)"


def catch_up_sql(
    tables: list[tuple[DayTable, datetime, datetime]],
    shard: str,
    start: ShardSnapshot,
    until: ShardSnapshot,
    condition: AuditQuery | FlowQuery | None,
    after: Position | None,
    limit: int,
) -> tuple[str, list[Any]]:
    """A resume's rows of one shard written after ``start`` and seen by ``until``, that match
    ``condition``, in (ts, owner id, id) order after ``after``: at most ``limit``. Each row
    with its table's owner id, its change's transaction and whether it was a merge."""
    params = search_sql.Params()
    since, seen_by = params.add(start.text()), params.add(until.text())
    matches = "true" if condition is None else search_sql.matches(condition, params)
    cap = params.add(limit)
    branches = []
    for table, first_ts, last_ts in tables:
        change = _change(table.kind)
        column = "ts" if table.kind == "audit" else "first_seen"
        columns = search_sql.AUDIT_COLUMNS if table.kind == "audit" else search_sql.FLOW_COLUMNS
        merged = "false" if table.kind == "audit" else _merged(since)
        keyset = search_sql.keyset(after, shard, table.owner_id, column, False, params)
        branches.append(
            f"(SELECT {columns}, {int(table.owner_id)}::bigint AS owner_id, "
            f"{change}::text::bigint AS xid, {merged} AS merged FROM {layout.heap(table)} "
            f"WHERE {column} >= {params.add(first_ts)} AND {column} <= {params.add(last_ts)} "
            f"AND {_after(change, since)} "
            f"AND pg_visible_in_snapshot({change}, {seen_by}::text::pg_snapshot) "
            f"AND {matches} AND {keyset} ORDER BY {column}, id LIMIT {cap})"
        )
    return (
        f"SELECT * FROM ({' UNION ALL '.join(branches)}) AS rows "
        f"ORDER BY ts, owner_id, id LIMIT {cap}",
        params.values,
    )
