"""The router's promotion job (SHARDLOG_SHARED__ENABLED): every SHARDLOG_SHARED__PROMOTE_INTERVAL_S
the owner-days of today and yesterday that outgrew their share are moved to tables of their
own (router/sharing/promote.py). Several routers may run it, and `shardlog sharing promote`
beside them: a session advisory lock on the metadata database lets one run through at a time,
the others skip."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import date, timedelta

import asyncpg

from router import clock
from router.catalog.cache import CatalogCache
from router.catalog.snapshot import CatalogSnapshot
from router.db.pools import ShardPools
from router.periodic import PeriodicTask
from router.settings import IngestSettings, SharedSettings
from router.sharing.metrics import PromotionMetrics
from router.sharing.promote import PromotionReport, promote_all

log = logging.getLogger(__name__)

# pg_advisory_lock key of promotion runs ('shpromo' as a number).
RUN_LOCK = 0x736870726F6D6F
Observer = Callable[[PromotionReport], Awaitable[object]]


async def locked_promotion(
    metadata: asyncpg.Pool,
    pools: ShardPools,
    snapshot: CatalogSnapshot,
    shared: SharedSettings,
    ingest: IngestSettings,
    days: Sequence[date] | None = None,
) -> PromotionReport | None:
    """A promotion run over ``days`` (today and yesterday unless given), or None when another
    run holds the lock."""
    today = clock.today()
    async with metadata.acquire() as lock_connection:
        try:
            if not await lock_connection.fetchval("SELECT pg_try_advisory_lock($1)", RUN_LOCK):
                return None
            try:
                return await promote_all(
                    metadata,
                    pools,
                    snapshot,
                    days or [today - timedelta(days=1), today],
                    shared,
                    ingest,
                )
            finally:
                await lock_connection.execute("SELECT pg_advisory_unlock($1)", RUN_LOCK)
        except BaseException:
            # A lock that may still be held ends with its session.
            lock_connection.terminate()
            raise


class PromotionJob:
    def __init__(
        self,
        metadata: asyncpg.Pool,
        pools: ShardPools,
        catalog: CatalogCache,
        shared: SharedSettings,
        ingest: IngestSettings,
        metrics: PromotionMetrics,
        observer: Observer | None = None,
    ) -> None:
        self._metrics = metrics
        self._metadata = metadata
        self._pools = pools
        self._catalog = catalog
        self._shared = shared
        self._ingest = ingest
        self._observer = observer
        self._periodic = PeriodicTask(
            "shared owner-days promotion", lambda: shared.promote_interval_s, self.run_once
        )

    def start(self) -> None:
        self._periodic.start()

    async def stop(self) -> None:
        await self._periodic.stop()

    async def run_once(self) -> PromotionReport | None:
        report = await locked_promotion(
            self._metadata, self._pools, self._catalog.snapshot, self._shared, self._ingest
        )
        if report is not None:
            self._metrics.observe(report)
        if report is not None and (report.promoted or report.failed):
            log.info(
                "promotion: %d owner-day(s) moved to their own tables, %d failed",
                len(report.promoted),
                len(report.failed),
            )
            if self._observer is not None:
                await self._observer(report)
        return report
