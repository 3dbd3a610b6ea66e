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

import logging
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

import asyncpg

from router import clock
from router.compaction import shared_sql
from router.compaction.lock import with_run_lock
from router.compaction.metrics import CompactionMetrics
from router.compaction.pace import Pace
from router.compaction.plan import OwnerDay, Packed, Step, next_step
from router.compaction.runner import ERROR_CHARS, Failure
from router.compaction.steps import (
    VerificationFailed,
    as_tables_role,
    made_once,
    transaction_settings,
    verify,
)
from router.db import names
from router.db.connection import Connection
from router.db.failures import DRIVER_ERRORS, describe
from router.db.names import DayTable, Kind
from router.db.pools import ShardPools
from router.errors import Unavailable
from router.settings import CompactionSettings

log = logging.getLogger(__name__)

# A shard-day's failure record on its shared_tables row, as runner.Failure's fields.
FAILURE_COLUMNS = "failed_step AS step, failure AS error, failures, first_failed_at, last_failed_at"

CODEC = "shardlog_segments"


@dataclass
class SharedDay:
    """What a run did to one shard-day, and where it stands (``state``: runner.Outcome's)."""

    shard: str
    kind: Kind
    day: date
    steps: list[str] = field(default_factory=list)
    state: Step = "copy"
    rows: int = 0
    segments: int = 0
    heap_bytes: int = 0
    packed_bytes: int = 0
    waiting: str | None = None
    failed: str | None = None
    failure: Failure | None = None
    layout: str = "heap"
    switched_s_ago: float | None = None

    def to_json(self) -> dict[str, Any]:
        failure = self.failure
        return {
            "shard": self.shard,
            "kind": self.kind,
            "day": self.day.isoformat(),
            "steps": self.steps,
            "state": "failed" if self.failed or failure else self.state,
            "rows": self.rows,
            "segments": self.segments,
            "heap_bytes": self.heap_bytes,
            "packed_bytes": self.packed_bytes,
            "waiting": self.waiting,
            "error": self.failed or (failure.error if failure else None),
            "failed_step": failure.step if failure else None,
            "failures": failure.failures if failure else 0,
            "first_failed_at": failure.first_failed_at.isoformat() if failure else None,
            "last_failed_at": failure.last_failed_at.isoformat() if failure else None,
        }


@dataclass
class SharedSurvey:
    days: list[SharedDay] = field(default_factory=list)
    # Shards whose records could not be read (their shard-days are left out).
    unreachable: dict[str, str] = field(default_factory=dict)


def shard_day(kind: Kind, day: date) -> DayTable:
    """The shard-day as the layout's helpers take it (owner id 0, its shared rows)."""
    return DayTable(kind, 0, day, own=False, shared=True, shared_compacted=True)


async def survey_shared_days(
    metadata: asyncpg.Pool,
    pools: ShardPools,
    settings: CompactionSettings,
    only: date | None = None,
    failed_only: bool = False,
) -> SharedSurvey:
    """Every registered audit shard-day (``only``: of that day; ``failed_only``: whose last
    step failed) with its state, read from the catalog and each shard's record of owner id 0;
    nothing changed."""
    rows = await metadata.fetch(
        "SELECT shard, kind, day, layout, "
        "extract(epoch FROM now() - layout_at)::float8 AS switched_s_ago, "
        f"{FAILURE_COLUMNS} FROM shared_tables "
        "WHERE kind = 'audit' AND ($1::date IS NULL OR day = $1) "
        "AND (NOT $2 OR failed_step IS NOT NULL) ORDER BY day, shard",
        only,
        failed_only,
    )
    survey = SharedSurvey()
    records: dict[str, dict[date, Packed]] = {}
    for shard in sorted({r["shard"] for r in rows}):
        try:
            records[shard] = await _records(pools, shard)
        except DRIVER_ERRORS as exc:
            survey.unreachable[shard] = describe(exc)
        except Unavailable as exc:  # no pool: a shard the catalog marks down
            survey.unreachable[shard] = exc.message
    now = clock.now()
    for row in rows:
        if row["shard"] not in records:
            continue
        day = SharedDay(
            row["shard"],
            row["kind"],
            row["day"],
            layout=row["layout"],
            switched_s_ago=row["switched_s_ago"],
        )
        packed = records[day.shard].get(day.day)
        day.state = _state(day, packed, now, settings)
        if packed is not None:
            day.rows, day.segments = packed.rows, packed.segments
            day.heap_bytes, day.packed_bytes = packed.heap_bytes, packed.packed_bytes
        if row["step"] is not None:
            day.failure = _failure(row)
        survey.days.append(day)
    return survey


def _failure(row: asyncpg.Record) -> Failure:
    return Failure(
        row["step"], row["error"], row["failures"], row["first_failed_at"], row["last_failed_at"]
    )


def _state(
    day: SharedDay,
    packed: Packed | None,
    now: datetime,
    settings: CompactionSettings,
    clear_now: bool = False,
) -> Step:
    owner_day = OwnerDay(
        day.shard,
        shard_day(day.kind, day.day),
        day.layout == "compacted",
        day.switched_s_ago,
        packed,
    )
    return next_step(owner_day, now, settings.closed_after_s, settings.clear_after_s, clear_now)


async def _records(pools: ShardPools, shard: str) -> dict[date, Packed]:
    """The shard's records of compacted shard-days (compacted_days rows of owner id 0)."""
    async with pools.reader(shard).acquire() as connection:
        rows = await connection.fetch(
            "SELECT day, segments, rows, heap_bytes, packed_bytes, "
            "cleared_at IS NOT NULL AS cleared FROM compacted_days "
            "WHERE kind = 'audit' AND owner_id = 0"
        )
    return {
        r["day"]: Packed(r["segments"], r["rows"], r["heap_bytes"], r["packed_bytes"], r["cleared"])
        for r in rows
    }


async def compact_shared_days(
    metadata: asyncpg.Pool,
    pools: ShardPools,
    settings: CompactionSettings,
    only: date | None = None,
    clear_now: bool = False,
    metrics: CompactionMetrics | None = None,
    failed_only: bool = False,
) -> list[SharedDay] | None:
    """Every closed shard-day of ``only`` (else of all days) taken as far as it can go now,
    one after another, under the compaction runs' lock (None: another run holds it), the
    copies paced by SHARDLOG_COMPACTION__MAX_ROWS_PER_S with the shard-day as one item."""

    async def run() -> list[SharedDay]:
        survey = await survey_shared_days(metadata, pools, settings, only, failed_only)
        pace = Pace(settings.max_rows_per_s)
        days = [d for d in survey.days if d.state != "open"]
        for day in days:
            if day.state != "done":
                await compact_shared_day(metadata, pools, settings, day, clear_now, pace, metrics)
        return days

    return await with_run_lock(metadata, run)


async def compact_shared_day(
    metadata: asyncpg.Pool,
    pools: ShardPools,
    settings: CompactionSettings,
    outcome: SharedDay,
    clear_now: bool = False,
    pace: Pace | None = None,
    metrics: CompactionMetrics | None = None,
) -> SharedDay:
    """One shard-day taken as far as it can go now, each step's state read back before it;
    a failed step recorded on its shared_tables row, a step taken clearing that record."""
    table = shard_day(outcome.kind, outcome.day)
    step: Step = "copy"
    try:
        async with pools.writer(outcome.shard).acquire() as connection:
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
                _took(outcome, "copy", metrics, record["rows"])
                if pace is not None:
                    await pace.copied(record["rows"])
            outcome.rows, outcome.segments = record["rows"], record["segments"]
            outcome.heap_bytes, outcome.packed_bytes = record["heap_bytes"], record["packed_bytes"]
            outcome.state = step = "switch"
            layout_at = None
            if outcome.layout != "compacted":
                layout_at = await _switch(metadata, table, outcome.shard)
                outcome.layout, outcome.switched_s_ago = "compacted", 0.0
                _took(outcome, "switch", metrics)
            if record["cleared_at"] is not None:
                outcome.state = "done"
                return await _succeeded(metadata, outcome)
            if layout_at is None:
                layout_at = await _layout_at(metadata, table, outcome.shard)
            due = layout_at + timedelta(seconds=settings.clear_after_s)
            if not clear_now and clock.now() < due:
                outcome.state = "wait"
                outcome.waiting = f"the clear, from {due.isoformat()}"
                return await _succeeded(metadata, outcome)
            outcome.state = step = "clear"
            await _clear(connection, table, settings)
            outcome.state = "done"
            _took(outcome, "clear", metrics)
    except (VerificationFailed, *DRIVER_ERRORS) as exc:
        outcome.failed = str(exc) if isinstance(exc, VerificationFailed) else describe(exc)
        if metrics is not None:
            metrics.shared_failures.inc()
        await _failed(metadata, outcome, step)
        return outcome
    return await _succeeded(metadata, outcome)


def _took(outcome: SharedDay, step: Step, metrics: CompactionMetrics | None, rows: int = 0) -> None:
    outcome.steps.append(step)
    if metrics is not None:
        metrics.shared_step(step, rows)


async def _layout_at(metadata: asyncpg.Pool, table: DayTable, shard: str) -> datetime:
    layout_at: datetime | None = await metadata.fetchval(
        "SELECT layout_at FROM shared_tables WHERE kind = $1 AND day = $2 AND shard = $3",
        table.kind,
        table.day,
        shard,
    )
    # A shard-day switched before layout_at was recorded clears as if just switched.
    return layout_at or clock.now()


async def _failed(metadata: asyncpg.Pool, outcome: SharedDay, step: Step) -> None:
    """The failure recorded on the shard-day's shared_tables row (best effort: a catalog that
    cannot be written leaves the failure in the run's answer and the log)."""
    try:
        row = await metadata.fetchrow(
            "UPDATE shared_tables SET failed_step = $4, failure = $5, failures = failures + 1, "
            "first_failed_at = coalesce(first_failed_at, $6), last_failed_at = $6 "
            "WHERE kind = $1 AND day = $2 AND shard = $3 "
            f"RETURNING {FAILURE_COLUMNS}",
            outcome.kind,
            outcome.day,
            outcome.shard,
            step,
            (outcome.failed or "")[:ERROR_CHARS],
            clock.now(),
        )
    except DRIVER_ERRORS as exc:
        log.warning(
            "compaction failure of shard-day %s %s not recorded: %s",
            outcome.shard,
            outcome.day,
            describe(exc),
        )
        return
    if row is not None:
        outcome.failure = _failure(row)


async def _succeeded(metadata: asyncpg.Pool, outcome: SharedDay) -> SharedDay:
    """A shard-day taken a step further (or found where it should be) loses its failure
    record."""
    if outcome.failure is None and not outcome.steps:
        return outcome
    try:
        await metadata.execute(
            "UPDATE shared_tables SET failed_step = NULL, failure = NULL, failures = 0, "
            "first_failed_at = NULL, last_failed_at = NULL "
            "WHERE kind = $1 AND day = $2 AND shard = $3 AND failed_step IS NOT NULL",
            outcome.kind,
            outcome.day,
            outcome.shard,
        )
        outcome.failure = None
    except DRIVER_ERRORS as exc:
        log.warning("compaction failure record not cleared: %s", describe(exc))
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
