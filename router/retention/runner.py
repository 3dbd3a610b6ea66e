"""One retention run: take the inventory, plan, refuse on suspicious evidence, drop (archiving
where the policy says so), and report to the log, the metrics and the history.

One run at a time across every router and CLI: a session advisory lock on the metadata
database is held for the whole run. The router's job skips a run when the lock is taken; the
CLI waits for it (SHARDLOG_RETENTION__LOCK_WAIT_S).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import asyncpg

from router import clock
from router.catalog.snapshot import CatalogSnapshot
from router.db.connection import Connection
from router.db.pools import ShardPools
from router.metrics import Metrics
from router.retention import history, inventory, owner_shared, shared_days
from router.retention.dropper import Dropped, Dropper
from router.retention.owner_shared import OwnerSharedReport
from router.retention.plan import Expired, make_plan, refusal
from router.retention.shared_days import ExpiredShared
from router.retention.shared_dropper import SharedDropped, SharedDropper
from router.settings import IngestSettings, RetentionSettings, SharedSettings

log = logging.getLogger(__name__)

# pg_advisory_lock key of retention runs ('shardlog retention' as a number).
RUN_LOCK = 0x73686172646C6F67


def real_today() -> date:
    return clock.today()


@dataclass(frozen=True)
class RunOptions:
    trigger: str = "cli"
    as_of: date | None = None  # default: today
    dry_run: bool = False
    force: bool = False
    scope: inventory.Filter = field(default_factory=inventory.Filter)
    lock_wait_s: float = 0.0


@dataclass
class RunReport:
    status: str  # done | partial | refused | skipped | dry_run
    as_of: date
    run_id: int | None = None
    message: str | None = None
    tables_total: int = 0
    drops: list[dict[str, Any]] = field(default_factory=list)
    unreachable: dict[str, str] = field(default_factory=dict)
    shared_days_total: int = 0
    shared_drops: list[dict[str, Any]] = field(default_factory=list)
    owners_shared: OwnerSharedReport = field(default_factory=OwnerSharedReport)

    def totals(self) -> dict[str, int]:
        dropped = [d for d in self.drops if d["outcome"] in ("dropped", "already_gone")]
        return {
            "tables_total": self.tables_total,
            "tables_dropped": len(dropped),
            "tables_failed": sum(1 for d in self.drops if d["outcome"] == "failed"),
            "rows_dropped": sum(d["rows"] or 0 for d in dropped),
            "bytes_dropped": sum(d["bytes"] or 0 for d in dropped),
            **self.shared_totals(),
        }

    def shared_totals(self) -> dict[str, int]:
        return {
            "shared_days_total": self.shared_days_total,
            "shared_days_dropped": sum(
                1 for d in self.shared_drops if d["outcome"] in ("dropped", "already_gone")
            ),
            "shared_days_failed": sum(1 for d in self.shared_drops if d["outcome"] == "failed"),
            **self.owners_shared.totals(),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "run_id": self.run_id,
            "as_of": self.as_of.isoformat(),
            "message": self.message,
            **self.totals(),
            "drops": self.drops,
            "shared_drops": self.shared_drops,
            "shared_purges": self.owners_shared.purges,
            "shared_promotions": self.owners_shared.promotions,
            "shared_held": self.owners_shared.held,
            "unreachable": self.unreachable,
        }


def _drop_json(expired: Expired, result: Dropped | None) -> dict[str, Any]:
    info = expired.info
    return {
        "kind": info.table.kind,
        "owner": info.owner,
        "owner_id": info.table.owner_id,
        "day": info.table.day.isoformat(),
        "shard": info.shard,
        "table": info.table.name,
        "keep_days": expired.keep_days,
        "outcome": result.outcome if result else "would_drop",
        "rows": result.rows if result and result.rows is not None else info.rows,
        "bytes": result.bytes if result and result.bytes is not None else info.bytes,
        "archive": result.archive if result else ("planned" if expired.archive else None),
        "error": result.error if result else None,
    }


def _shared_json(expired: ExpiredShared, result: SharedDropped | None) -> dict[str, Any]:
    planned = expired.to_json()
    if result is None:
        return {**planned, "outcome": "would_drop", "error": None, "archives": []}
    return {
        **planned,
        "outcome": result.outcome,
        "error": result.error,
        "archives": list(result.archives),
    }


class RetentionRunner:
    def __init__(
        self,
        metadata: asyncpg.Pool,
        pools: ShardPools,
        settings: RetentionSettings,
        default_keep_days: int,
        metrics: Metrics | None = None,
        today: Callable[[], date] = real_today,
        sharing: tuple[SharedSettings, IngestSettings] | None = None,
    ) -> None:
        self._metadata = metadata
        self._pools = pools
        self._settings = settings
        self._default_keep_days = default_keep_days
        self._metrics = metrics
        self._today = today
        self._dropper = Dropper(metadata, pools, settings)
        self._shared_dropper = SharedDropper(metadata, pools, settings)
        # Owners' own policies on shared days: the purge's pace, the promotion's settings.
        self._sharing = sharing or (SharedSettings(), IngestSettings())

    async def _lock(self, connection: Connection, wait_s: float) -> bool:
        deadline = time.monotonic() + wait_s
        while True:
            if await connection.fetchval("SELECT pg_try_advisory_lock($1)", RUN_LOCK):
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.2)

    async def run(self, snapshot: CatalogSnapshot, options: RunOptions) -> RunReport:
        today = self._today()
        as_of = options.as_of or today
        async with self._metadata.acquire() as lock_connection:
            try:
                if not await self._lock(lock_connection, options.lock_wait_s):
                    return RunReport(
                        "skipped", as_of, message="another retention run holds the lock"
                    )
                try:
                    report = await self._run_locked(snapshot, options, as_of, today)
                finally:
                    await lock_connection.execute("SELECT pg_advisory_unlock($1)", RUN_LOCK)
            except BaseException:
                # The pool gives connections back without a reset query: a lock that may be
                # held still (a failure or cancellation anywhere above) ends with its session.
                lock_connection.terminate()
                raise
        self._observe(report)
        return report

    async def _run_locked(
        self, snapshot: CatalogSnapshot, options: RunOptions, as_of: date, today: date
    ) -> RunReport:
        found = await inventory.take(self._metadata, self._pools, snapshot, options.scope)
        shared, shared_unreachable = await shared_days.take(
            self._metadata, self._pools, snapshot, options.scope
        )
        plan = make_plan(
            found.tables,
            snapshot,
            as_of,
            today,
            self._default_keep_days,
            self._settings.max_drop_share,
        )
        shared_expired = shared_days.expired_shared(
            shared, snapshot, as_of, today, self._default_keep_days, options.scope.kind
        )
        report = RunReport(
            "dry_run" if options.dry_run else "done",
            as_of,
            tables_total=plan.total,
            unreachable={**shared_unreachable, **found.unreachable},
            shared_days_total=len(shared),
        )
        owner_rules = await owner_shared.rules(
            self._metadata, snapshot, self._default_keep_days, options.scope
        )
        shared_total, shared_dropping = shared_days.weights(shared, shared_expired)
        too_much = refusal(
            len(plan.expired) + shared_dropping,
            plan.total + shared_total,
            self._settings.max_drop_share,
        )
        if too_much is not None and not options.force:
            report.status, report.message = "refused", too_much
        if options.dry_run:
            report.drops = [_drop_json(e, None) for e in plan.expired]
            await self._owners_on_shared(snapshot, options, as_of, owner_rules, report)
            shared_expired = await self._owners_longer(
                snapshot, as_of, owner_rules, shared_expired, report, dry_run=True
            )
            report.shared_drops = [_shared_json(e, None) for e in shared_expired]
            return report
        report.run_id = await history.start(
            self._metadata, options.trigger, as_of, False, options.force
        )
        if report.status != "refused":
            report.drops = await self._drop_all(snapshot, report.run_id, plan.expired)
            await self._owners_on_shared(snapshot, options, as_of, owner_rules, report)
            shared_expired = await self._owners_longer(
                snapshot, as_of, owner_rules, shared_expired, report, dry_run=False
            )
            report.shared_drops = await self._drop_shared(snapshot, shared_expired)
            report.unreachable.update(report.owners_shared.unreachable)
            totals = report.totals()
            if (
                totals["tables_failed"]
                or totals["shared_days_failed"]
                or report.unreachable
                or report.owners_shared.incomplete
            ):
                report.status = "partial"
                report.message = self._partial_message(report)
        await history.finish(
            self._metadata, report.run_id, report.status, report.message, report.totals()
        )
        return report

    async def _owners_on_shared(
        self,
        snapshot: CatalogSnapshot,
        options: RunOptions,
        as_of: date,
        rules: list[owner_shared.OwnerRule],
        report: RunReport,
    ) -> None:
        """Owners with shorter policies than their group's: their rows of the shared days
        the group still keeps deleted (counted in a dry run)."""
        await owner_shared.purge_shorter(
            self._metadata,
            self._pools,
            snapshot,
            self._sharing[0],
            rules,
            as_of,
            self._today(),
            options.scope,
            report.owners_shared,
            options.dry_run,
        )

    async def _owners_longer(
        self,
        snapshot: CatalogSnapshot,
        as_of: date,
        rules: list[owner_shared.OwnerRule],
        expired: list[ExpiredShared],
        report: RunReport,
        dry_run: bool,
    ) -> list[ExpiredShared]:
        return await owner_shared.keep_longer(
            self._metadata,
            self._pools,
            snapshot,
            self._sharing,
            rules,
            expired,
            as_of,
            report.owners_shared,
            dry_run,
        )

    async def _drop_all(
        self, snapshot: CatalogSnapshot, run_id: int, expired: list[Expired]
    ) -> list[dict[str, Any]]:
        """Shards drop at the same time (each one is its own server, and releasing a big table's
        files takes the kernel tens of milliseconds), one table after another on each shard.
        The report keeps the plan's order."""
        results: dict[int, dict[str, Any]] = {}
        by_shard: dict[str, list[int]] = defaultdict(list)
        for index, item in enumerate(expired):
            by_shard[item.info.shard].append(index)
        gate = asyncio.Semaphore(self._settings.parallel_shards)

        async def drop_on(indexes: list[int]) -> None:
            async with gate:
                for index in indexes:
                    item = expired[index]
                    info = item.info
                    result = await self._dropper.drop(
                        snapshot, info.table, info.shard, info.owner, item.archive
                    )
                    await history.record(self._metadata, run_id, info.table, info.shard, result)
                    results[index] = _drop_json(item, result)
                    self._log_drop(results[index])

        # Every shard's drops run to their end before an error goes up: none is left running
        # behind the run's lock.
        outcomes = await asyncio.gather(
            *(drop_on(indexes) for indexes in by_shard.values()), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return [results[index] for index in range(len(expired))]

    async def _drop_shared(
        self, snapshot: CatalogSnapshot, expired: list[ExpiredShared]
    ) -> list[dict[str, Any]]:
        """Expired shared days, shards at the same time, one shard-day after another on each;
        in the plan's order."""
        results: dict[int, dict[str, Any]] = {}
        gate = asyncio.Semaphore(self._settings.parallel_shards)
        by_shard: dict[str, list[int]] = defaultdict(list)
        for index, item in enumerate(expired):
            by_shard[item.entry.shard].append(index)

        async def drop_on(indexes: list[int]) -> None:
            async with gate:
                for index in indexes:
                    result = await self._shared_dropper.drop(snapshot, expired[index])
                    results[index] = _shared_json(expired[index], result)
                    self._log_shared_drop(results[index])

        outcomes = await asyncio.gather(
            *(drop_on(indexes) for indexes in by_shard.values()), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
        return [results[index] for index in range(len(expired))]

    @staticmethod
    def _log_shared_drop(drop: dict[str, Any]) -> None:
        if drop["outcome"] == "failed":
            log.warning(
                "retention: shared day %s on %s not dropped: %s",
                drop["day"],
                drop["shard"],
                drop["error"],
            )
        else:
            log.info(
                "retention: shared day %s on %s: %s (%s)",
                drop["day"],
                drop["shard"],
                drop["outcome"],
                ", ".join(drop["tables"]) or "registry entries only",
            )

    @staticmethod
    def _partial_message(report: RunReport) -> str:
        parts = []
        failed = report.totals()["tables_failed"]
        if failed:
            parts.append(f"{failed} table(s) could not be dropped and are retried next run")
        shared_failed = report.totals()["shared_days_failed"]
        if shared_failed:
            parts.append(
                f"{shared_failed} shared day(s) could not be dropped and are retried next run"
            )
        held = report.totals()["shared_days_held"]
        if held:
            parts.append(
                f"{held} shared table(s) kept: an owner with a longer policy still has rows "
                "in them that could not be moved to its own tables (retried next run)"
            )
        left = sum(1 for p in report.owners_shared.purges if p["outcome"] == "left")
        if left:
            parts.append(
                f"{left} shared table(s) still hold rows of an owner whose shorter policy "
                "expired them (written meanwhile?); deleted next run"
            )
        if report.unreachable:
            parts.append(
                "unreachable shards were not examined: " + ", ".join(sorted(report.unreachable))
            )
        return "; ".join(parts)

    @staticmethod
    def _log_drop(drop: dict[str, Any]) -> None:
        if drop["outcome"] == "failed":
            log.warning(
                "retention: %s (%s owner %s, %s) on %s not dropped: %s",
                drop["table"],
                drop["kind"],
                drop["owner"],
                drop["day"],
                drop["shard"],
                drop["error"],
            )
        else:
            log.info(
                "retention: %s %s (%s owner %s, %s) on %s: %s rows, %s bytes%s",
                drop["outcome"],
                drop["table"],
                drop["kind"],
                drop["owner"],
                drop["day"],
                drop["shard"],
                drop["rows"],
                drop["bytes"],
                f", archived to {drop['archive']}" if drop["archive"] else "",
            )

    def _observe(self, report: RunReport) -> None:
        if report.status == "refused":
            log.warning("retention run refused: %s", report.message)
        if self._metrics is None:
            return
        metrics = self._metrics
        metrics.retention_runs.labels(report.status).inc()
        if report.status in ("skipped", "dry_run"):
            return
        metrics.retention_last_run.set(clock.time())
        for drop in report.drops:
            if drop["outcome"] == "failed":
                metrics.retention_failures.labels(drop["kind"]).inc()
            elif drop["outcome"] == "dropped":
                metrics.retention_tables.labels(drop["kind"]).inc()
                metrics.retention_rows.labels(drop["kind"]).inc(drop["rows"] or 0)
                metrics.retention_bytes.labels(drop["kind"]).inc(drop["bytes"] or 0)
