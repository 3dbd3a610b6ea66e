"""The router's compaction job (SHARDLOG_COMPACTION__ENABLED): a run every
SHARDLOG_COMPACTION__INTERVAL_S (the first one an interval after start) over every closed
owner-day. Several routers may run it, and `shardlog compact` beside them: a session advisory
lock on the metadata database lets one run through at a time, the others skip. Shards without
the shardlog_segments extension are skipped; the job says so when the set of them changes."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import asyncpg

from router.catalog.cache import CatalogCache
from router.catalog.snapshot import CatalogSnapshot
from router.compaction.lock import with_run_lock
from router.compaction.runner import Compactor, Report, Scope
from router.compaction.shared import SharedDay
from router.periodic import PeriodicTask

log = logging.getLogger(__name__)

Observer = Callable[[Report], Awaitable[object]]
SharedRun = Callable[[], Awaitable[list[SharedDay] | None]]


async def locked_run(
    metadata: asyncpg.Pool,
    compactor: Compactor,
    snapshot: CatalogSnapshot,
    scope: Scope,
    clear_now: bool = False,
) -> Report | None:
    """A run over the closed owner-days of ``scope``, or None when another run holds the
    lock."""
    return await with_run_lock(metadata, lambda: compactor.run(snapshot, scope, clear_now))


class CompactionJob:
    def __init__(
        self,
        metadata: asyncpg.Pool,
        compactor: Compactor,
        catalog: CatalogCache,
        interval_s: float,
        observer: Observer | None = None,
        shared_days: SharedRun | None = None,
    ) -> None:
        """``shared_days``: a run over the closed shared days (router/compaction/shared.py),
        after each run over owner-days, and what to tell of the shard-days it changed."""
        self._metadata = metadata
        self._compactor = compactor
        self._catalog = catalog
        self._observer = observer
        self._shared_days = shared_days
        self._periodic = PeriodicTask("compaction run", lambda: interval_s, self.run_once)
        self._without_codec: list[str] = []

    def start(self) -> None:
        self._periodic.start()

    async def stop(self) -> None:
        await self._periodic.stop()

    async def run_once(self) -> Report | None:
        report = await locked_run(self._metadata, self._compactor, self._catalog.snapshot, Scope())
        if self._shared_days is not None:
            await self._shared_days()
        if report is None:
            return None
        self._note_without_codec(report.without_codec)
        if report.changed:
            log.info("compaction run: %s", report.summary())
            if self._observer is not None:
                await self._observer(report)
        return report

    def _note_without_codec(self, shards: list[str]) -> None:
        if shards == self._without_codec:
            return
        if shards:
            log.warning(
                "compaction skips %s: no shardlog_segments extension there (install it, then "
                "CREATE EXTENSION shardlog_segments as the shard's superuser; docs/operations.md, "
                '"Compaction")',
                ", ".join(shards),
            )
        else:
            log.info("compaction: every shard has the shardlog_segments extension now")
        self._without_codec = list(shards)
