"""pg_stat_statements of every shard, day tables folded (router/db/names.py): the COPY of
every owner's day table is one entry, as is the search page of one day table, whatever the
owner and the day."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

import asyncpg

from router.db.names import fold_day_tables
from router.db.roles import READER, WRITER
from services.postgres import PostgresInstance

TOP = 20
_READ = """
    SELECT userid::regrole::text AS role, query, calls, total_exec_time, rows
    FROM pg_stat_statements
    WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
"""


@dataclass(frozen=True)
class Statement:
    role: str
    query: str
    calls: int
    total_ms: float
    rows: int

    def summary(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "total_ms": round(self.total_ms, 1),
            "mean_ms": round(self.total_ms / max(self.calls, 1), 3),
        }


@dataclass(frozen=True)
class ShardStatements:
    """One shard's entries as pg_stat_statements holds them (``distinct``) and folded."""

    distinct: int
    folded: list[Statement]


def fold(raw: list[Statement]) -> list[Statement]:
    """Entries that differ only in their day tables summed into one, by role and text."""
    sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0, 0])
    for entry in raw:
        total = sums[(entry.role, fold_day_tables(entry.query))]
        total[0] += entry.calls
        total[1] += entry.total_ms
        total[2] += entry.rows
    return [
        Statement(role, query, int(calls), total_ms, int(rows))
        for (role, query), (calls, total_ms, rows) in sums.items()
    ]


def by_calls(entries: list[Statement]) -> list[Statement]:
    return sorted(entries, key=lambda entry: (-entry.calls, -entry.total_ms, entry.query))


def by_time(entries: list[Statement]) -> list[Statement]:
    return sorted(entries, key=lambda entry: (-entry.total_ms, entry.query))


async def reset(instances: list[PostgresInstance]) -> None:
    for instance in instances:
        connection = await asyncpg.connect(instance.spec.dsn())
        try:
            await connection.execute("SELECT pg_stat_statements_reset()")
        finally:
            await connection.close()


async def read(instance: PostgresInstance) -> ShardStatements:
    connection = await asyncpg.connect(instance.spec.dsn())
    try:
        rows = await connection.fetch(_READ)
    finally:
        await connection.close()
    raw = [
        Statement(row["role"], row["query"], row["calls"], row["total_exec_time"], row["rows"])
        for row in rows
    ]
    return ShardStatements(len(raw), fold(raw))


def write_path(entries: list[Statement]) -> Statement | None:
    """The write of a part of audit rows into a day table (one per write request of fewer than
    1,000 rows: router/routing/placement.py): the one statement that claims the ledger row and
    inserts the rows (router/ingest/statements.py, parts up to ONE_STATEMENT_ROWS), or the COPY
    of a larger part."""
    one_statement = [
        e
        for e in entries
        if e.role == WRITER
        and e.query.startswith("WITH ")
        and 'INSERT INTO "audit_oN_YYYYMMDD"' in e.query
    ]
    if one_statement:
        # pg_stat_statements may keep the one statement under two query ids (its text with
        # constants as written, and normalised): one entry, their calls summed.
        return Statement(
            WRITER,
            one_statement[0].query,
            sum(e.calls for e in one_statement),
            sum(e.total_ms for e in one_statement),
            sum(e.rows for e in one_statement),
        )
    return _one(entries, WRITER, "COPY ", '"audit_oN_YYYYMMDD"')


def search_page(entries: list[Statement]) -> Statement | None:
    """The page of one audit day table (router/search/sql.py page_sql)."""
    return _one(entries, READER, "SELECT ", 'FROM "audit_oN_YYYYMMDD"')


def _one(entries: list[Statement], role: str, start: str, part: str) -> Statement | None:
    found = [e for e in entries if e.role == role and e.query.startswith(start) and part in e.query]
    if len(found) > 1:
        raise RuntimeError(f"{len(found)} entries where one was expected: {found}")
    return found[0] if found else None
