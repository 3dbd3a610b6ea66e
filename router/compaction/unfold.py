"""Late flow records into a compacted flow day (docs/architecture.md, "Compacted days",
"Flows"). A flow is one row per 5-tuple that later records merge into; on a compacted flow day
that row may be in a segment. Before a merge (or a deletion) of some 5-tuples, in its
transaction, their rows are moved back into the heap and their segments rewritten without
them: the merge then finds each in the heap by the table's unique 5-tuple index and adds to
it, and its merged_xid, after the compaction's snapshot, makes every reader take the row from
the heap (layout.late). A flow is always one row, in the heap or in a segment.

Why a copy and a merge never miss each other: the merge takes its table's ROW EXCLUSIVE lock
first (a statement of its own), then looks for the owner-day's compacted_days row (the next
statement, a new snapshot). A copy takes SHARE on the table before its snapshot
(statements.copy_lock): it either committed before the lock was granted, and is seen, or it
waits for the merge to commit and packs the merged rows. Movers of one owner-day queue on an
advisory lock, each after the one before it committed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from router import clock
from router.compaction import layout, plan
from router.db import ddl
from router.db.connection import Connection
from router.db.names import DayTable

# The 5-tuple, as the table's unique index has it, and where each is in a written row.
KEY = ddl.FLOW_KEY
_KEY_TYPES = ("inet", "inet", "integer", "integer", "smallint")
_KEY_IN_ROW = tuple(ddl.FLOW_WRITE_COLUMNS.index(column) for column in KEY)
_ARRAYS = (
    "unnest("
    + ", ".join(f"${n + 1}::{kind}[]" for n, kind in enumerate(_KEY_TYPES))
    + f") AS k ({', '.join(KEY)})"
)


def _same_flow(row: str) -> str:
    """The key ``k`` is the 5-tuple of ``row`` (NULL protos alike, as the unique index)."""
    return " AND ".join(
        f"k.{c} IS NOT DISTINCT FROM {row}.{c}" if c == "proto" else f"k.{c} = {row}.{c}"
        for c in KEY
    )


def move_sql(table: DayTable, source: str) -> str:
    """The rows of the 5-tuples of ``source`` (a FROM item with the key's columns) that the
    owner-day's segments hold, put back into the heap (a heap that still holds a row, not
    cleared yet, keeps it: the same row) and taken out of their segments: a segment left
    empty is deleted, the others repacked (the codec's default level) with their row count
    lowered; their bounds stay, still true of the rows left. Answers how many moved."""
    columns = layout.table_columns(table)
    packed = ", ".join(
        f"array_agg(u.{c.strip()} ORDER BY u.ord)" for c in layout.FLOW_TABLE_COLUMNS.split(",")
    )
    owner = int(table.owner_id)
    return f"""
        WITH keys AS (SELECT DISTINCT {", ".join(KEY)} FROM {source}),
        held AS (
            SELECT s.seq, {layout.unpacked_columns(table)} FROM {layout.segments(table)}
            WHERE {layout.owned(table)} AND EXISTS (SELECT FROM keys AS k WHERE {_same_flow("u")})
        ),
        back AS (
            INSERT INTO {table.quoted} ({columns}) SELECT {columns} FROM held
            ON CONFLICT DO NOTHING
        ),
        gone AS (SELECT seq, count(*) AS n FROM held GROUP BY seq),
        emptied AS (
            DELETE FROM {table.segments} AS s USING gone
            WHERE s.owner_id = {owner} AND s.seq = gone.seq AND s.rows = gone.n
        ),
        repacked AS (
            UPDATE {table.segments} AS s SET rows = s.rows - gone.n, block = (
                SELECT shardlog_pack_flow({packed}) FROM shardlog_unpack_flow(s.block) AS u
                WHERE NOT EXISTS (SELECT FROM keys AS k WHERE {_same_flow("u")})
            )
            FROM gone WHERE s.owner_id = {owner} AND s.seq = gone.seq AND s.rows > gone.n
        )
        SELECT count(*) FROM held"""


async def _compacted(connection: Connection, table: DayTable) -> bool:
    """Whether the owner-day is compacted on this shard; when it is, the transaction holds
    its movers' lock."""
    await connection.execute(f"LOCK TABLE {table.quoted} IN ROW EXCLUSIVE MODE")
    if not await connection.fetchval(
        "SELECT EXISTS (SELECT FROM compacted_days "
        "WHERE kind = 'flow' AND owner_id = $1 AND day = $2)",
        table.owner_id,
        table.day,
    ):
        return False
    await _movers_lock(connection, table)
    return True


async def _movers_lock(connection: Connection, table: DayTable) -> None:
    await connection.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 37))", f"{table.name} unfold"
    )


async def before_merge(
    connection: Connection, table: DayTable, rows: Sequence[Sequence[Any]] | None = None
) -> int:
    """Unfold the 5-tuples about to be merged into ``table``: those of ``rows`` (in
    ddl.FLOW_WRITE_COLUMNS order), or of the staging table when None. Today's and, for half
    an hour, yesterday's flows (the hot path) are not compacted yet: nothing is asked."""
    if table.kind != "flow" or not plan.may_be_compacted(table.day, clock.now()):
        return 0
    if rows is None:
        return await _unfold(connection, table, ddl.FLOW_STAGE, [])
    keys = [[row[index] for row in rows] for index in _KEY_IN_ROW]
    return await _unfold(connection, table, _ARRAYS, keys)


async def before_delete(
    connection: Connection, tables: list[DayTable], keys: list[list[Any]]
) -> int:
    """Unfold the 5-tuples about to be deleted from ``tables`` (flow tables of one owner that
    exist; ``keys``: five arrays, KEY's columns): every table locked in one statement, then
    the compacted ones found in one more."""
    if not tables:
        return 0
    names = ", ".join(table.quoted for table in tables)
    await connection.execute(f"LOCK TABLE {names} IN ROW EXCLUSIVE MODE")
    compacted = await connection.fetch(
        "SELECT day FROM compacted_days WHERE kind = 'flow' AND owner_id = $1 "
        "AND day = ANY($2::date[]) ORDER BY day",
        tables[0].owner_id,
        [table.day for table in tables],
    )
    moved = 0
    for row in compacted:
        table = next(t for t in tables if t.day == row["day"])
        await _movers_lock(connection, table)
        moved += await _move(connection, table, _ARRAYS, keys)
    return moved


async def _unfold(connection: Connection, table: DayTable, source: str, params: list[Any]) -> int:
    if not await _compacted(connection, table):
        return 0
    return await _move(connection, table, source, params)


async def _move(connection: Connection, table: DayTable, source: str, params: list[Any]) -> int:
    return int(await connection.fetchval(move_sql(table, source), *params) or 0)
