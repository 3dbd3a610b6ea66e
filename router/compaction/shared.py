"""Compacting the shared tables of closed days (docs/architecture.md, "Compacting shared
days"; step 5a): a shard-day at a time, in three steps whose state is read back before each,
so a run never repeats or skips one:

1. copy (the shard, one REPEATABLE READ transaction as the writer): the shared segment table
   ensured, the shared table's rows packed many owners to a segment in (ts, owner_id, id)
   order, the snapshot recorded in compacted_days under owner id 0, verified by count and
   checksum, the shard-day's view made;
2. switch (the catalog): shared_tables.layout = 'compacted' and layout_at, the coordinator's
   child of the shard-day pointed at the view;
3. clear (the shard, once SHARDLOG_COMPACTION__CLEAR_AFTER_S has passed since the switch): the
   shared table locked, the rows the copy saw removed.

Audit only: flows are not written shared. The router's compaction job runs it after each run
over owner-days; `shardlog sharing compact` once."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

import asyncpg

from router import clock
from router.compaction import shared_sql
from router.compaction.lock import with_run_lock
from router.compaction.plan import closed
from router.compaction.steps import (
    VerificationFailed,
    as_tables_role,
    made_once,
    transaction_settings,
    verify,
)
from router.db import names
from router.db.connection import Connection
from router.db.names import DayTable, Kind
from router.db.pools import ShardPools
from router.settings import CompactionSettings

CODEC = "shardlog_segments"


@dataclass
class SharedDay:
    """What a run did to one shard-day, and where it stands."""

    shard: str
    kind: Kind
    day: date
    steps: list[str] = field(default_factory=list)
    rows: int = 0
    segments: int = 0
    heap_bytes: int = 0
    packed_bytes: int = 0
    waiting: str | None = None
    failed: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "shard": self.shard,
            "kind": self.kind,
            "day": self.day.isoformat(),
            "steps": self.steps,
            "rows": self.rows,
            "segments": self.segments,
            "heap_bytes": self.heap_bytes,
            "packed_bytes": self.packed_bytes,
            "waiting": self.waiting,
            "failed": self.failed,
        }


def shard_day(kind: Kind, day: date) -> DayTable:
    """The shard-day as the layout's helpers take it (owner id 0, its shared rows)."""
    return DayTable(kind, 0, day, own=False, shared=True, shared_compacted=True)


async def compact_shared_days(
    metadata: asyncpg.Pool,
    pools: ShardPools,
    settings: CompactionSettings,
    only: date | None = None,
    clear_now: bool = False,
) -> list[SharedDay] | None:
    """Every closed shard-day of ``only`` (else of all days) taken as far as it can go now,
    one after another, under the compaction runs' lock (None: another run holds it)."""

    async def run() -> list[SharedDay]:
        entries = await closed_shared_days(metadata, settings, only)
        return [
            await compact_shared_day(metadata, pools, settings, entry, clear_now)
            for entry in entries
        ]

    return await with_run_lock(metadata, run)


async def closed_shared_days(
    metadata: asyncpg.Pool, settings: CompactionSettings, only: date | None = None
) -> list[tuple[str, Kind, date, str, datetime | None]]:
    """(shard, kind, day, layout, layout_at) of the registered audit shared tables of closed
    days (``only``: of that day)."""
    rows = await metadata.fetch(
        "SELECT shard, kind, day, layout, layout_at FROM shared_tables WHERE kind = 'audit' "
        "AND ($1::date IS NULL OR day = $1) ORDER BY day, shard",
        only,
    )
    now = clock.now()
    return [
        (r["shard"], r["kind"], r["day"], r["layout"], r["layout_at"])
        for r in rows
        if closed(r["day"], now, settings.closed_after_s)
    ]


async def compact_shared_day(
    metadata: asyncpg.Pool,
    pools: ShardPools,
    settings: CompactionSettings,
    entry: tuple[str, Kind, date, str, datetime | None],
    clear_now: bool = False,
) -> SharedDay:
    shard, kind, day, layout, layout_at = entry
    outcome = SharedDay(shard, kind, day)
    table = shard_day(kind, day)
    try:
        async with pools.writer(shard).acquire() as connection:
            record = await _record(connection, table)
            if record is None:
                if not await connection.fetchval(
                    "SELECT to_regclass($1) IS NOT NULL", table.shared_quoted
                ):
                    outcome.waiting = "its shared table is gone"
                    return outcome
                if not await connection.fetchval(
                    "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = $1)", CODEC
                ):
                    outcome.waiting = f"the {CODEC} extension on the shard"
                    return outcome
                await made_once(connection, table.shared_segments, shared_sql.table_ddl(table))
                record = await _copy(connection, table, settings)
                outcome.steps.append("copied")
            outcome.rows, outcome.segments = record["rows"], record["segments"]
            outcome.heap_bytes, outcome.packed_bytes = record["heap_bytes"], record["packed_bytes"]
            if layout != "compacted":
                layout_at = await _switch(metadata, table, shard)
                outcome.steps.append("switched")
            if record["cleared_at"] is not None:
                return outcome
            assert layout_at is not None
            due = layout_at + timedelta(seconds=settings.clear_after_s)
            if not clear_now and clock.now() < due:
                outcome.waiting = f"the clear, from {due.isoformat()}"
                return outcome
            await _clear(connection, table, settings)
            outcome.steps.append("cleared")
    except (VerificationFailed, asyncpg.PostgresError, OSError) as exc:
        outcome.failed = str(exc)
    return outcome


async def _record(connection: Connection, table: DayTable) -> asyncpg.Record | None:
    return await connection.fetchrow(
        "SELECT segments, rows, heap_bytes, packed_bytes, cleared_at FROM compacted_days "
        "WHERE kind = $1 AND owner_id = 0 AND day = $2",
        table.kind,
        table.day,
    )


async def _copy(
    connection: Connection, table: DayTable, settings: CompactionSettings
) -> asyncpg.Record:
    async with connection.transaction(isolation="repeatable_read"):
        await transaction_settings(connection, settings)
        await connection.execute(
            shared_sql.copy_sql(table),
            settings.segment_rows,
            settings.segment_bytes,
            settings.zstd_level,
        )
        heap = await connection.fetchrow(shared_sql.record_sql(table), table.day)
        packed = await connection.fetchrow(shared_sql.verify_sql(table))
        verify(heap, packed, table.shared_name, "the shared table")
        await as_tables_role(connection, shared_sql.view_ddl(table))
    record = await _record(connection, table)
    assert record is not None
    return record


async def _switch(metadata: asyncpg.Pool, table: DayTable, shard: str) -> datetime:
    async with metadata.acquire() as connection, connection.transaction():
        switched: datetime = await connection.fetchval(
            "UPDATE shared_tables SET layout = 'compacted', layout_at = now() "
            "WHERE kind = $1 AND day = $2 AND shard = $3 RETURNING layout_at",
            table.kind,
            table.day,
            shard,
        )
        child = names.shared_foreign_table(table.kind, table.day, shard)
        view = names.quote_literal(f"{table.shared_name}_all")
        await connection.execute(
            f"ALTER FOREIGN TABLE IF EXISTS {child} OPTIONS (SET table_name {view})"
        )
    return switched


async def _clear(connection: Connection, table: DayTable, settings: CompactionSettings) -> None:
    async with connection.transaction():
        await transaction_settings(connection, settings)
        await connection.execute(f"LOCK TABLE {table.shared_quoted} IN ACCESS EXCLUSIVE MODE")
        late_rows = await connection.fetchval(shared_sql.late_rows_sql(table))
        await connection.execute(shared_sql.clear_sql(table, late_rows))
        await connection.execute(
            "UPDATE compacted_days SET cleared_at = now() "
            "WHERE kind = $1 AND owner_id = 0 AND day = $2",
            table.kind,
            table.day,
        )
