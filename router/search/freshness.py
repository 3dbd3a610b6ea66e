"""A plan that read an owner-day from its shared table alone while a promotion moved its rows
to its own table (docs/architecture.md, "Promotion"): found after the read, and read again.

A promotion records the owner-day's own table in the catalog, then moves its rows in one
transaction that also marks its owner_days row promoted. A reader that planned before the
record reads the shared table alone; if the move committed before its statement's snapshot,
the rows are gone from it. Reading the owner_days rows after the statement finds that: a move
its statement missed committed before the statement began, so before this read too. The own
table exists by then (it was made before the move), so the owner-day is read again with it. A
move after the statement's snapshot makes no harm (the statement saw the rows where they were)
and at worst one read again."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from datetime import date
from typing import Any

from router.db.connection import Connection
from router.db.names import (
    KINDS,
    DayTable,
    Kind,
    day_table,
    day_table_format,
    owner_days_table,
    quote_ident,
)
from router.search import sql

# Reads of one statement when promotions keep moving its owner-days (each read finds them
# moved): the last one reads the own tables of every owner-day found so.
READS = 3
Build = Callable[[list[DayTable]], tuple[str, list[Any]]]


async def read(
    connection: Connection, build: Build, tables: list[DayTable], deadline_s: float
) -> list[Any]:
    """The rows of ``build(tables)``, read again with their own tables for the owner-days
    planned as shared alone that a promotion moved meanwhile. ``deadline_s``: each
    statement's timeout."""
    for _ in range(READS - 1):
        text, params = build(tables)
        records = list(await connection.fetch(text, *params, timeout=deadline_s))
        moved = await promoted(connection, tables, deadline_s)
        if not moved:
            return records
        tables = with_own_tables(tables, moved)
    text, params = build(tables)
    return list(await connection.fetch(text, *params, timeout=deadline_s))


def promoted_sql(tables: list[DayTable]) -> tuple[str, list[Any]] | None:
    """Which of ``tables`` planned as shared alone have been promoted, their own tables made:
    (kind, owner id, day) rows; None when none was planned so. For a shard-day branch: the
    owner-days of its day whose owners it covers, promoted, and not read from their own
    tables by the plan (their rows left the shared table)."""
    alone: dict[date, list[DayTable]] = defaultdict(list)
    for table in tables:
        if table.shared and not table.own:
            alone[table.day].append(table)
    if not alone:
        return None
    params = sql.Params()
    branches = []
    for day, of_day in sorted(alone.items()):
        listed = [t for t in of_day if not t.shard_day]
        owner_days = quote_ident(owner_days_table(day))
        # Promoted and its own table there (the promotion makes it before the move).
        if listed:
            kinds = params.add([t.kind for t in listed])
            owners = params.add([t.owner_id for t in listed])
            names = params.add([t.quoted for t in listed])
            branches.append(
                f"SELECT f.kind, f.owner_id, DATE '{day.isoformat()}' AS day "
                f"FROM {owner_days} AS f "
                f"JOIN unnest({kinds}::text[], {owners}::bigint[], {names}::text[]) "
                "AS p (kind, owner_id, own) USING (kind, owner_id) "
                "WHERE f.promoted AND to_regclass(p.own) IS NOT NULL"
            )
        for branch in (t for t in of_day if t.shard_day):
            assert branch.reach is not None
            read = params.add(
                [t.owner_id for t in tables if t.own and (t.kind, t.day) == (branch.kind, day)]
            )
            own = params.add(day_table_format(branch.kind, day))
            branches.append(
                f"SELECT f.kind, f.owner_id, DATE '{day.isoformat()}' AS day "
                f"FROM {owner_days} AS f "
                f"WHERE f.promoted AND f.kind = {params.add(branch.kind)} "
                f"AND f.owner_id <> ALL({read}::bigint[]) "
                f"AND to_regclass(format({own}, f.owner_id)) IS NOT NULL "
                f"AND {sql.reached(branch.kind, branch.reach, params, 'f.owner_id')}"
            )
    return " UNION ALL ".join(branches), params.values


async def promoted(
    connection: Connection, tables: list[DayTable], deadline_s: float
) -> set[tuple[Kind, int, date]]:
    """``deadline_s``: the statement timeout of the read (the search's shard deadline)."""
    statement = promoted_sql(tables)
    if statement is None:
        return set()
    text, params = statement
    rows = await connection.fetch(text, *params, timeout=deadline_s)
    return {(KINDS[r["kind"]], r["owner_id"], r["day"]) for r in rows}


def with_own_tables(tables: list[DayTable], moved: set[tuple[Kind, int, date]]) -> list[DayTable]:
    """``tables`` with the own tables of the owner-days ``moved`` read too: beside their
    shared rows when planned, else (owners a shard-day branch covers) alone."""
    planned = {(t.kind, t.owner_id, t.day) for t in tables}
    kept = [replace(t, own=True) if (t.kind, t.owner_id, t.day) in moved else t for t in tables]
    return kept + [
        replace(day_table(kind, owner, day), shared=False)
        for kind, owner, day in sorted(moved - planned)
    ]
