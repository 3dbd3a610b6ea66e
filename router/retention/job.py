"""The router's retention job: a run every SHARDLOG_RETENTION__INTERVAL_S (the first one an
interval after start). Several routers may run it: the run lock lets one through at a time
and the others skip."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from router.catalog.cache import CatalogCache
from router.periodic import PeriodicTask
from router.retention.runner import RetentionRunner, RunOptions, RunReport

log = logging.getLogger(__name__)

Observer = Callable[[RunReport], Awaitable[object]]


class RetentionJob:
    def __init__(
        self,
        runner: RetentionRunner,
        catalog: CatalogCache,
        interval_s: float,
        observer: Observer | None = None,
    ) -> None:
        self._runner = runner
        self._catalog = catalog
        self._interval_s = interval_s
        self._observer = observer
        self._periodic = PeriodicTask("retention run", lambda: self._interval_s, self._scheduled)

    async def run_once(self) -> RunReport:
        return await self._runner.run(self._catalog.snapshot, RunOptions(trigger="router"))

    def start(self) -> None:
        self._periodic.start()

    async def stop(self) -> None:
        await self._periodic.stop()

    async def _scheduled(self) -> None:
        report = await self.run_once()
        if self._observer is not None:
            await self._observer(report)
        if report.status != "skipped":
            totals = report.totals()
            log.info(
                "retention run %s: %s; %d table(s) dropped, %d failed",
                report.run_id,
                report.status,
                totals["tables_dropped"],
                totals["tables_failed"],
            )
