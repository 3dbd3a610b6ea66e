"""Compaction of closed audit and flow days: copy and verify, switch, clear (docs/architecture.md,
"Compacted days"). Each step is one transaction and idempotent; the state of every owner-day
is read back from the registry and the shards before each step, so a run stopped anywhere is
completed by the next."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import asyncpg

from router import clock
from router.catalog.snapshot import CatalogSnapshot
from router.compaction import plan, registry, statements, steps
from router.compaction.metrics import CompactionMetrics
from router.compaction.pace import Pace
from router.compaction.plan import OwnerDay, Packed, Step
from router.compaction.steps import VerificationFailed
from router.db.failures import DRIVER_ERRORS, describe
from router.db.names import DayTable, Kind, day_table
from router.db.pools import ShardPools
from router.settings import CompactionSettings

log = logging.getLogger(__name__)

CODEC = "shardlog_segments"
# lock_not_available, serialization_failure, deadlock_detected: worth another attempt.
_RETRIED = ("55P03", "40001", "40P01")
# The most of an error's text a failure record keeps.
ERROR_CHARS = 2000


KINDS: frozenset[Kind] = frozenset(("audit", "flow"))


@dataclass(frozen=True)
class Scope:
    day: date | None = None
    owner_ids: frozenset[int] | None = None
    kinds: frozenset[Kind] = KINDS
    failed_only: bool = False
    # A page of the registry's owner-days in (day, kind, owner id, shard) order: those after
    # ``after``, at most ``limit`` (None: all).
    after: Position | None = None
    limit: int | None = None


@dataclass(frozen=True, order=True)
class Position:
    """An owner-day's place in the survey's order, and its text in the admin API's paging."""

    day: date
    kind: str
    owner_id: int
    shard: str

    def text(self) -> str:
        return f"{self.day.isoformat()}/{self.kind}/{self.owner_id}/{self.shard}"

    @classmethod
    def parse(cls, text: str) -> Position:
        """Raises ValueError on text that ``text()`` did not make."""
        day, kind, owner_id, shard = text.split("/", 3)
        position = cls(date.fromisoformat(day), kind, int(owner_id), shard)
        if kind not in KINDS or not 0 <= position.owner_id < 2**63:
            raise ValueError("not a position")
        return position


@dataclass
class Outcome:
    """What one owner-day went through in a call: the steps taken and where it stands."""

    shard: str
    table: DayTable
    steps: list[Step] = field(default_factory=list)
    state: Step = "copy"
    rows: int = 0
    heap_bytes: int = 0
    packed_bytes: int = 0
    error: str | None = None
    # The owner-day's failure record, as the survey read it (None: its last attempt did not
    # fail), and whether this call failed it again or took it further.
    failure: Failure | None = None

    def to_json(self, owner_keys: dict[int, str] | None = None) -> dict[str, Any]:
        failure = self.failure
        return {
            "kind": self.table.kind,
            "owner": (owner_keys or {}).get(self.table.owner_id, str(self.table.owner_id)),
            "day": self.table.day.isoformat(),
            "shard": self.shard,
            "steps": list(self.steps),
            "state": "failed" if self.error or failure else self.state,
            "rows": self.rows,
            "heap_bytes": self.heap_bytes,
            "packed_bytes": self.packed_bytes,
            "error": self.error or (failure.error if failure else None),
            "failed_step": failure.step if failure else None,
            "failures": failure.failures if failure else 0,
            "first_failed_at": failure.first_failed_at.isoformat() if failure else None,
            "last_failed_at": failure.last_failed_at.isoformat() if failure else None,
        }


@dataclass(frozen=True)
class Failure:
    """An owner-day's last failed step (the metadata's compaction_failures)."""

    step: str
    error: str
    failures: int
    first_failed_at: datetime
    last_failed_at: datetime


@dataclass
class Report:
    owner_days: list[Outcome] = field(default_factory=list)
    # Shards that could not be read, and shards without the codec (nothing compacted there).
    unreachable: dict[str, str] = field(default_factory=dict)
    without_codec: list[str] = field(default_factory=list)
    # Where the next page of a paged survey starts (None: this was the last).
    next_after: Position | None = None

    @property
    def failed(self) -> list[Outcome]:
        """The owner-days this call failed."""
        return [o for o in self.owner_days if o.error]

    @property
    def changed(self) -> bool:
        """Whether a step was taken or failed: what the self-audit records."""
        return any(o.steps or o.error for o in self.owner_days)

    def audit_details(self) -> dict[str, int]:
        return {
            "owner_days": len(self.owner_days),
            "steps": sum(len(o.steps) for o in self.owner_days),
            "failed": len(self.failed),
        }

    def summary(self) -> str:
        details = self.audit_details()
        return (
            f"{details['steps']} step(s) over {details['owner_days']} owner-day(s), "
            f"{details['failed']} failed"
        )


async def owner_keys(metadata: asyncpg.Pool, report: Report) -> dict[int, str]:
    """The keys of the owners (audit owners and switches) a report names."""
    rows = await metadata.fetch(
        "SELECT id, key FROM owners WHERE id = ANY($1::bigint[])",
        sorted({o.table.owner_id for o in report.owner_days}),
    )
    return {row["id"]: row["key"] for row in rows}


def report_json(report: Report, keys: dict[int, str]) -> dict[str, Any]:
    return {
        "owner_days": [o.to_json(keys) for o in report.owner_days],
        "unreachable": report.unreachable,
        "without_codec": report.without_codec,
        "next_after": report.next_after.text() if report.next_after else None,
    }


class Compactor:
    def __init__(
        self,
        metadata: asyncpg.Pool,
        pools: ShardPools,
        settings: CompactionSettings,
        metrics: CompactionMetrics | None = None,
    ) -> None:
        self._metadata = metadata
        self._pools = pools
        self._settings = settings
        self._metrics = metrics

    # --- what there is -------------------------------------------------------------------

    async def survey(self, snapshot: CatalogSnapshot, scope: Scope) -> Report:
        """Every owner-day in scope with its state; nothing changed."""
        rows = await self._metadata.fetch(
            "SELECT d.kind, d.owner_id, d.day, d.shard, d.layout, "
            "extract(epoch FROM now() - d.layout_at)::float8 AS switched_s_ago, "
            "f.step, f.error, f.failures, f.first_failed_at, f.last_failed_at "
            "FROM day_tables d LEFT JOIN compaction_failures f USING (kind, owner_id, day, shard) "
            "WHERE d.kind = ANY($3::text[]) AND ($1::date IS NULL OR d.day = $1) "
            "AND ($2::bigint[] IS NULL OR d.owner_id = ANY($2)) "
            "AND (NOT $4 OR f.step IS NOT NULL) "
            "AND ($5::date IS NULL OR (d.day, d.kind, d.owner_id, d.shard) > ($5, $6, $7, $8)) "
            "ORDER BY d.day, d.kind, d.owner_id, d.shard LIMIT $9",
            scope.day,
            None if scope.owner_ids is None else sorted(scope.owner_ids),
            sorted(scope.kinds),
            scope.failed_only,
            *(
                (None, None, None, None)
                if scope.after is None
                else (scope.after.day, scope.after.kind, scope.after.owner_id, scope.after.shard)
            ),
            scope.limit,
        )
        report = Report()
        if scope.limit is not None and len(rows) == scope.limit:
            last = rows[-1]
            report.next_after = Position(last["day"], last["kind"], last["owner_id"], last["shard"])
        packed: dict[str, dict[tuple[str, int, date], Packed]] = {}
        for shard in sorted({row["shard"] for row in rows}):
            state = snapshot.shards.get(shard)
            if state is None or state.state == "down":
                report.unreachable[shard] = "down" if state else "not in the catalog"
                continue
            try:
                packed[shard] = await self._packed(shard)
            except _CodecMissing:
                report.without_codec.append(shard)
            except DRIVER_ERRORS as exc:
                report.unreachable[shard] = describe(exc)
        for row in rows:
            if row["shard"] not in packed:
                continue
            table = day_table(row["kind"], row["owner_id"], row["day"])
            owner_day = OwnerDay(
                shard=row["shard"],
                table=table,
                compacted=row["layout"] == "compacted",
                switched_s_ago=row["switched_s_ago"],
                packed=packed[row["shard"]].get((table.kind, table.owner_id, table.day)),
            )
            outcome = Outcome(owner_day.shard, table, state=self._step(owner_day))
            if row["step"] is not None:
                outcome.failure = Failure(
                    row["step"],
                    row["error"],
                    row["failures"],
                    row["first_failed_at"],
                    row["last_failed_at"],
                )
            if owner_day.packed is not None:
                outcome.rows = owner_day.packed.rows
                outcome.heap_bytes = owner_day.packed.heap_bytes
                outcome.packed_bytes = owner_day.packed.packed_bytes
            report.owner_days.append(outcome)
        return report

    async def _packed(
        self, shard: str, table: DayTable | None = None
    ) -> dict[tuple[str, int, date], Packed]:
        """The shard's compacted_days rows (of one owner-day when ``table`` is given)."""
        async with self._pools.writer(shard).acquire() as connection:
            if not await connection.fetchval(
                "SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = $1)", CODEC
            ):
                raise _CodecMissing(shard)
            rows = await connection.fetch(
                "SELECT kind, owner_id, day, segments, rows, heap_bytes, packed_bytes, "
                "cleared_at IS NOT NULL AS cleared FROM compacted_days "
                "WHERE $1::bigint IS NULL OR (kind = $3 AND owner_id = $1 AND day = $2)",
                None if table is None else table.owner_id,
                None if table is None else table.day,
                None if table is None else table.kind,
            )
        return {
            (r["kind"], r["owner_id"], r["day"]): Packed(
                r["segments"], r["rows"], r["heap_bytes"], r["packed_bytes"], r["cleared"]
            )
            for r in rows
        }

    def _step(self, owner_day: OwnerDay, clear_now: bool = False) -> Step:
        return plan.next_step(
            owner_day,
            clock.now(),
            plan.closed_after_s(owner_day.table.kind, self._settings.closed_after_s),
            self._settings.clear_after_s,
            clear_now,
        )

    # --- doing it ------------------------------------------------------------------------

    async def run(self, snapshot: CatalogSnapshot, scope: Scope, clear_now: bool = False) -> Report:
        """Every owner-day in scope taken as far as it can go now: shards in parallel, the
        owner-days of one shard one after another, the copies paced by MAX_ROWS_PER_S."""
        report = await self.survey(snapshot, scope)
        pace = Pace(self._settings.max_rows_per_s)
        if self._metrics is not None:
            self._metrics.shards_without_codec.set(len(report.without_codec))
        by_shard: dict[str, list[Outcome]] = {}
        for outcome in report.owner_days:
            by_shard.setdefault(outcome.shard, []).append(outcome)

        async def shard_run(shard: str, outcomes: list[Outcome]) -> None:
            taken = await self._in_batches(shard, outcomes, clear_now, pace)
            for outcome in outcomes:
                if id(outcome) not in taken:
                    await self._advance(outcome, clear_now, pace)

        await asyncio.gather(*(shard_run(s, o) for s, o in by_shard.items()))
        return report

    async def _in_batches(
        self, shard: str, outcomes: list[Outcome], clear_now: bool, pace: Pace
    ) -> set[int]:
        """The survey's audit owner-days to copy, then to switch, and its owner-days to clear,
        taken BATCH_OWNER_DAYS at a time, one transaction a step for each batch: the fixed cost
        of a step (a commit, its round trips) paid once a batch. A batch that fails is left
        whole to ``_advance`` (owner-day by owner-day, with its retries and failure records):
        nothing of it was kept. Flow copies stay one by one (each holds its heap's merges for
        its own length only). Returns the ``id`` of the owner-days taken as far as they go."""
        size = self._settings.batch_owner_days
        if size < 2:
            return set()
        copies = [
            o
            for o in outcomes
            if o.state == "copy" and o.failure is None and o.table.kind == "audit"
        ]
        for batch in _batches(copies, size):
            if await self._batch_step("copy", shard, batch, clear_now):
                await pace.copied(sum(o.rows for o in batch))
                await self._batch_step("switch", shard, batch, clear_now)
        clears = [o for o in outcomes if o.state == "clear" and o.failure is None]
        for batch in _batches(clears, size):
            await self._batch_step("clear", shard, batch, clear_now)
        return {id(o) for o in outcomes if o.steps and o.state in ("wait", "done")}

    async def _batch_step(
        self, step: Step, shard: str, batch: list[Outcome], clear_now: bool
    ) -> bool:
        tables = [o.table for o in batch]
        started = time.monotonic()
        packed: list[Packed] = []
        try:
            if step == "copy":
                packed = await self._copy_batch(shard, tables)
            elif step == "switch":
                await registry.switch(self._metadata, tables, shard)
            else:
                await self._clear(shard, tables)
        except (VerificationFailed, *DRIVER_ERRORS) as exc:
            log.info(
                "compaction: a batch of %d owner-days on %s failed its %s (%s); each is taken "
                "on its own",
                len(batch),
                shard,
                step,
                exc if isinstance(exc, VerificationFailed) else describe(exc),
            )
            return False
        share = (time.monotonic() - started) / len(batch)
        for k, outcome in enumerate(batch):
            outcome.steps.append(step)
            if self._metrics is not None:
                self._metrics.step(step, share)
            if step == "copy":
                outcome.rows = packed[k].rows
                outcome.heap_bytes = packed[k].heap_bytes
                outcome.packed_bytes = packed[k].packed_bytes
                if self._metrics is not None:
                    self._metrics.copied(outcome.rows, outcome.heap_bytes, outcome.packed_bytes)
                outcome.state = "switch"
            elif step == "switch":
                switched = Packed(0, outcome.rows, outcome.heap_bytes, outcome.packed_bytes, False)
                outcome.state = self._step(
                    OwnerDay(shard, outcome.table, True, 0.0, switched), clear_now
                )
            else:
                outcome.state = "done"
        return True

    async def _copy_batch(self, shard: str, tables: list[DayTable]) -> list[Packed]:
        """Audit owner-days of one day copied under one snapshot, in one transaction."""
        async with self._pools.writer(shard).acquire() as connection:
            await steps.segment_table(connection, tables[0])
            async with connection.transaction(isolation="repeatable_read"):
                await steps.transaction_settings(connection, self._settings)
                return [
                    await steps.copy_in(connection, table, shard, self._settings)
                    for table in tables
                ]

    async def compact_owner_day(
        self, table: DayTable, shard: str, *, clear_now: bool = False
    ) -> Outcome:
        """One owner-day of one shard taken as far as it can go now (all three steps when it
        is closed and ``clear_now``): what tests and `shardlog compact --owner` use."""
        outcome = Outcome(shard, table)
        await self._advance(outcome, clear_now, Pace(self._settings.max_rows_per_s))
        return outcome

    async def _advance(self, outcome: Outcome, clear_now: bool, pace: Pace) -> None:
        try:
            while True:
                owner_day = await self._read(outcome.shard, outcome.table)
                step = self._step(owner_day, clear_now)
                outcome.state = step
                if owner_day.packed is not None:
                    outcome.rows = owner_day.packed.rows
                    outcome.heap_bytes = owner_day.packed.heap_bytes
                    outcome.packed_bytes = owner_day.packed.packed_bytes
                if step in ("open", "wait", "done"):
                    break
                started = time.monotonic()
                await self._attempts(step, outcome.shard, outcome.table)
                outcome.steps.append(step)
                if self._metrics is not None:
                    self._metrics.step(step, time.monotonic() - started)
                if step == "copy":
                    await self._copied(outcome, pace)
        except (VerificationFailed, _CodecMissing, _Unregistered, *DRIVER_ERRORS) as exc:
            if self._metrics is not None:
                self._metrics.failures.inc()
            outcome.error = describe(exc) if not isinstance(exc, VerificationFailed) else str(exc)
            log.warning(
                "compaction of %s on %s failed: %s",
                outcome.table.name,
                outcome.shard,
                outcome.error,
            )
            await self._record_failure(outcome)
            return
        if outcome.steps:  # taken further: whatever failed before is over
            await self._forget_failure(outcome)

    async def _record_failure(self, outcome: Outcome) -> None:
        """Keeps the failure in the metadata (what the survey and the admin API show), unless
        the metadata itself cannot be reached: the log and the metric have it then."""
        assert outcome.error is not None
        table = outcome.table
        if outcome.state not in ("copy", "switch", "clear"):
            return  # its state could not be read: the shard is listed unreachable meanwhile
        try:
            row = await self._metadata.fetchrow(
                "INSERT INTO compaction_failures AS f (kind, owner_id, day, shard, step, error, "
                "first_failed_at, last_failed_at) "
                "SELECT $1, $2, $3, $4, $5, $6, $7, $7 WHERE EXISTS (SELECT 1 FROM day_tables "
                "WHERE kind = $1 AND owner_id = $2 AND day = $3 AND shard = $4) "
                "ON CONFLICT (kind, owner_id, day, shard) DO UPDATE SET step = $5, error = $6, "
                "failures = f.failures + 1, last_failed_at = $7 "
                "RETURNING step, error, failures, first_failed_at, last_failed_at",
                table.kind,
                table.owner_id,
                table.day,
                outcome.shard,
                outcome.state,
                outcome.error[:ERROR_CHARS],
                clock.now(),
            )
        except DRIVER_ERRORS as exc:
            log.warning("compaction failure of %s not recorded: %s", table.name, describe(exc))
            return
        if row is not None:
            outcome.failure = Failure(**dict(row))

    async def _forget_failure(self, outcome: Outcome) -> None:
        table = outcome.table
        try:
            await self._metadata.execute(
                "DELETE FROM compaction_failures WHERE kind = $1 AND owner_id = $2 AND day = $3 "
                "AND shard = $4",
                table.kind,
                table.owner_id,
                table.day,
                outcome.shard,
            )
        except DRIVER_ERRORS as exc:  # forgotten by the next run that takes it further
            log.warning("compaction failure of %s not cleared: %s", table.name, describe(exc))
            return
        outcome.failure = None

    async def _copied(self, outcome: Outcome, pace: Pace) -> None:
        """After a copy: its rows counted in the metrics, and the run's pace kept."""
        packed = (await self._packed(outcome.shard, outcome.table)).get(
            (outcome.table.kind, outcome.table.owner_id, outcome.table.day)
        )
        if packed is None:
            return
        if self._metrics is not None:
            self._metrics.copied(packed.rows, packed.heap_bytes, packed.packed_bytes)
        await pace.copied(packed.rows)

    async def _read(self, shard: str, table: DayTable) -> OwnerDay:
        row = await self._metadata.fetchrow(
            "SELECT layout, extract(epoch FROM now() - layout_at)::float8 AS switched_s_ago "
            "FROM day_tables WHERE kind = $1 AND owner_id = $2 AND day = $3 AND shard = $4",
            table.kind,
            table.owner_id,
            table.day,
            shard,
        )
        if row is None:
            raise _Unregistered(f"{table.name} on {shard} is not in the registry")
        packed = (await self._packed(shard, table)).get((table.kind, table.owner_id, table.day))
        return OwnerDay(shard, table, row["layout"] == "compacted", row["switched_s_ago"], packed)

    async def _attempts(self, step: Step, shard: str, table: DayTable) -> None:
        pause = self._settings.retry_backoff_s
        for attempt in range(1, self._settings.attempts + 1):
            try:
                if step == "copy":
                    await self._copy(shard, table)
                elif step == "switch":
                    await self._switch(shard, table)
                else:
                    await self._clear(shard, [table])
                return
            except asyncpg.PostgresError as exc:
                if exc.sqlstate not in _RETRIED or attempt == self._settings.attempts:
                    raise
            await asyncio.sleep(pause)
            pause *= 2

    async def _copy(self, shard: str, table: DayTable) -> None:
        async with self._pools.writer(shard).acquire() as connection:
            await steps.segment_table(connection, table)
            async with connection.transaction(isolation="repeatable_read"):
                await steps.transaction_settings(connection, self._settings)
                for lock in statements.copy_lock(table):
                    await connection.execute(lock)
                await steps.copy_in(connection, table, shard, self._settings)

    async def _switch(self, shard: str, table: DayTable) -> None:
        await registry.switch(self._metadata, [table], shard)

    async def _clear(self, shard: str, tables: list[DayTable]) -> None:
        async with self._pools.writer(shard).acquire() as connection, connection.transaction():
            await steps.transaction_settings(connection, self._settings)
            await steps.clear_in(connection, tables)


def _batches(outcomes: list[Outcome], size: int) -> Iterator[list[Outcome]]:
    """``outcomes`` in groups of at most ``size`` of one kind and day (one segment table, one
    snapshot's worth of heaps)."""
    groups: dict[tuple[str, date], list[Outcome]] = {}
    for outcome in outcomes:
        groups.setdefault((outcome.table.kind, outcome.table.day), []).append(outcome)
    for group in groups.values():
        for start in range(0, len(group), size):
            yield group[start : start + size]


class _CodecMissing(RuntimeError):
    def __init__(self, shard: str) -> None:
        super().__init__(
            f"{shard} lacks the {CODEC} extension (make install; then CREATE EXTENSION "
            f"{CODEC} as the shard's superuser)"
        )


class _Unregistered(RuntimeError):
    pass
