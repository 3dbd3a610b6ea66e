"""The shard side of the copy and the clear (docs/architecture.md, "Compacted days"), run in a
transaction the caller holds: one owner-day's, or a batch's of one shard, kind and day (one
commit for all of them; all or nothing)."""

from __future__ import annotations

from collections.abc import Sequence

from asyncpg import Record

from router.compaction import statements
from router.compaction.plan import Packed
from router.db import roles
from router.db.connection import Connection
from router.db.names import DayTable
from router.settings import CompactionSettings


class VerificationFailed(RuntimeError):
    """The segments did not hold exactly the heap's rows; nothing was kept."""


async def transaction_settings(connection: Connection, settings: CompactionSettings) -> None:
    await connection.execute(
        f"SET LOCAL lock_timeout = {int(settings.lock_timeout_ms)}; SET LOCAL TimeZone = 'UTC'"
    )


async def segment_table(connection: Connection, table: DayTable) -> None:
    """The day's segment table, made once however many compactions start together (its own
    transaction)."""
    await made_once(connection, table.segments, statements.segment_table_ddl(table))


async def made_once(connection: Connection, quoted: str, ddl: Sequence[str]) -> None:
    """The relation ``quoted`` made by ``ddl`` (as shardlog_tables) unless it exists, under an
    advisory lock of its name, in a transaction of its own."""
    async with connection.transaction():
        await connection.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 37))", quoted)
        if await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", quoted):
            return
        await connection.execute(f"SET LOCAL ROLE {roles.TABLES}")
        for statement in ddl:
            await connection.execute(statement)


async def copy_in(
    connection: Connection, table: DayTable, shard: str, settings: CompactionSettings
) -> Packed:
    """The owner-day's segments, its compacted_days record and its view, in the caller's
    repeatable-read transaction (its snapshot is the one recorded), verified against the heap
    first: VerificationFailed otherwise."""
    await connection.execute(
        statements.copy_sql(table),
        *statements.copy_parameters(
            table, settings.segment_rows, settings.segment_bytes, settings.zstd_level
        ),
    )
    heap = await connection.fetchrow(statements.record_sql(table), table.owner_id, table.day)
    packed = await connection.fetchrow(statements.verify_sql(table), table.owner_id)
    recorded = verify(heap, packed, f"{table.name} on {shard}", "the heap")
    await as_tables_role(connection, [statements.view_ddl(table), statements.view_grant(table)])
    return Packed(
        recorded["segments"],
        recorded["rows"],
        recorded["heap_bytes"],
        recorded["packed_bytes"],
        cleared=False,
    )


def verify(heap: Record | None, packed: Record | None, what: str, source: str) -> Record:
    """``heap``, the record of ``source``; VerificationFailed unless the segments' count and
    checksum (``packed``) are its."""
    assert heap is not None and packed is not None
    if (packed["n"], packed["checksum"]) != (heap["rows"], heap["checksum"]):
        raise VerificationFailed(
            f"{what}: the segments hold {packed['n']} rows (checksum {packed['checksum']}), "
            f"{source} {heap['rows']} (checksum {heap['checksum']}); nothing was kept"
        )
    return heap


async def as_tables_role(connection: Connection, ddl: Sequence[str]) -> None:
    """``ddl`` run as shardlog_tables (the owner of segment tables and views), in the caller's
    transaction."""
    await connection.execute(f"SET LOCAL ROLE {roles.TABLES}")
    for statement in ddl:
        await connection.execute(statement)
    await connection.execute("RESET ROLE")


async def clear_in(connection: Connection, tables: Sequence[DayTable]) -> None:
    """The heap rows each copy saw removed, under a lock that waits for every transaction
    still reading the heaps (a plan made before the switch among them); all of one kind and
    day."""
    quoted = ", ".join(table.quoted for table in tables)
    await connection.execute(f"LOCK TABLE {quoted} IN ACCESS EXCLUSIVE MODE")
    whole: list[DayTable] = []
    for table in tables:
        if await connection.fetchval(statements.late_rows_sql(table)):
            await connection.execute(statements.clear_sql(table, late_rows=True))
        else:
            whole.append(table)
    if whole:
        await connection.execute(statements.truncate_sql(whole))
    await connection.execute(
        "UPDATE compacted_days SET cleared_at = now() "
        "WHERE kind = $1 AND day = $2 AND owner_id = ANY($3::bigint[])",
        tables[0].kind,
        tables[0].day,
        [table.owner_id for table in tables],
    )
