"""The shard side of the copy and the clear (docs/architecture.md, "Compacted days"), run in a
transaction the caller holds: one owner-day's, or a batch's of one shard, kind and day (one
commit for all of them; all or nothing)."""

from __future__ import annotations

from collections.abc import Sequence

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
    async with connection.transaction():
        await connection.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 37))", table.segments
        )
        if await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", table.segments):
            return
        await connection.execute(f"SET LOCAL ROLE {roles.TABLES}")
        for statement in statements.segment_table_ddl(table):
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
    assert heap is not None and packed is not None
    if (packed["n"], packed["checksum"]) != (heap["rows"], heap["checksum"]):
        raise VerificationFailed(
            f"{table.name} on {shard}: the segments hold {packed['n']} rows "
            f"(checksum {packed['checksum']}), the heap {heap['rows']} "
            f"(checksum {heap['checksum']}); nothing was kept"
        )
    await connection.execute(f"SET LOCAL ROLE {roles.TABLES}")
    await connection.execute(statements.view_ddl(table))
    await connection.execute(statements.view_grant(table))
    await connection.execute("RESET ROLE")
    return Packed(
        heap["segments"], heap["rows"], heap["heap_bytes"], heap["packed_bytes"], cleared=False
    )


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
