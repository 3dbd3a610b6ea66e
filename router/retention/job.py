"""The router's retention job: a run every SHARDLOG_RETENTION__INTERVAL_S (the first one an
interval after start). Several routers may run it: the run lock lets one through at a time
and the others skip."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from router.catalog.cache import CatalogCache
from router.db.failures import DRIVER_ERRORS, describe
from router.retention.runner import RetentionRunner, RunOptions, RunReport

log = logging.getLogger(__name__)

_ERRORS = DRIVER_ERRORS


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
        self._task: asyncio.Task[None] | None = None

    async def run_once(self) -> RunReport:
        return await self._runner.run(self._catalog.snapshot, RunOptions(trigger="router"))

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="retention")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                report = await self.run_once()
            except _ERRORS as exc:
                log.warning("retention run failed: %s", describe(exc))
                continue
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
