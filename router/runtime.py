"""What a running router holds: its settings, the metadata pool, the catalog cache, the shard
pools and its metrics. Built by the app's lifespan, handed to routes by dependency."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import asyncpg

from router.auth.registry import TokenRegistry
from router.auth.self_audit import SelfAudit, record_run
from router.cache_entries import CacheEntries
from router.catalog.cache import CatalogCache
from router.catalog.owners import OwnerDirectory
from router.catalog.snapshot import SHARD_STATES, CatalogSnapshot
from router.compaction.job import CompactionJob
from router.compaction.metrics import CompactionMetrics
from router.compaction.runner import Compactor, Report
from router.compaction.shared import SharedDay, compact_shared_days
from router.db import catalog_login
from router.db.failures import DRIVER_ERRORS
from router.db.pools import ShardPools
from router.db.shard_health import ShardHealth
from router.ingest.body import ByteBudget
from router.ingest.deletion import FlowDeletion
from router.ingest.housekeeping import Housekeeping
from router.ingest.idempotency import IdempotencyStore
from router.ingest.service import IngestService
from router.ingest.writer import PartWriter
from router.metrics import Metrics
from router.reports.service import ReportService
from router.retention.job import RetentionJob
from router.retention.runner import RetentionRunner, RunReport
from router.search import fdw
from router.search.rows import RowService
from router.search.service import SearchService
from router.settings import Settings
from router.sharing.ahead import AheadJob, AheadReport
from router.sharing.job import PromotionJob
from router.sharing.metrics import PromotionMetrics
from router.sharing.promote import PromotionReport
from router.tail.hub import TailHub
from router.tail.service import TailService
from router.tail.signal import CommitSignal

log = logging.getLogger(__name__)


def job_actor(job: str = "retention") -> str:
    """How the self-audit names the router's own runs of a job (retention, compaction)."""
    return f"{job} job (router on {socket.gethostname()}, pid {os.getpid()})"


@dataclass
class Runtime:
    settings: Settings
    metadata: asyncpg.Pool
    catalog: CatalogCache
    pools: ShardPools
    metrics: Metrics
    owners: OwnerDirectory
    ingest: IngestService
    ingest_budget: ByteBudget
    flow_deletion: FlowDeletion
    housekeeping: Housekeeping
    search: SearchService
    reports: ReportService
    retention: RetentionRunner
    retention_job: RetentionJob
    compaction_job: CompactionJob
    auth: TokenRegistry
    self_audit: SelfAudit
    rows: RowService
    tail: TailService
    commit_signal: CommitSignal
    ahead_job: AheadJob
    promotion_job: PromotionJob

    @classmethod
    def build(cls, settings: Settings, metadata: asyncpg.Pool, metrics: Metrics) -> Runtime:
        catalog = CatalogCache(metadata, catalog_login.catalog_dsn(settings), settings.catalog)
        pools = ShardPools(settings.pools)
        ingest = settings.ingest
        owners = OwnerDirectory(metadata, catalog, audit_spread=ingest.spread_min_shards or None)
        idempotency = IdempotencyStore(metadata, ingest.idempotency_lease_s, ingest.retry_after_s)
        hub = TailHub(catalog, pools, metadata, settings.pools, settings.tail, metrics)
        commit_signal = CommitSignal(hub, pools)
        writer = PartWriter(pools, metadata, catalog, ingest, settings.shared)
        writer.on_commit = commit_signal
        writer.on_redirect = metrics.shared_redirects.inc
        service = IngestService(
            catalog,
            owners,
            writer,
            idempotency,
            ShardHealth(),
            ingest,
            metrics,
        )
        retention = RetentionRunner(
            metadata,
            pools,
            settings.retention,
            ingest.default_keep_days,
            metrics,
            sharing=(settings.shared, ingest),
        )
        self_audit = SelfAudit(service, catalog, metadata, metrics, settings.auth.audit_keep_days)

        async def observe(report: RunReport) -> bool:
            return await record_run(self_audit, job_actor(), report, always=False)

        async def audit_compaction(report: Report) -> bool:
            return await self_audit.record(
                job_actor("compaction"),
                "compaction.run",
                "closed days",
                **report.audit_details(),
            )

        compaction_metrics = CompactionMetrics(metrics.registry)

        async def shared_compaction() -> list[SharedDay] | None:
            days = await compact_shared_days(
                metadata, pools, settings.compaction, metrics=compaction_metrics
            )
            changed = [day.to_json() for day in days or [] if day.steps or day.failed]
            if changed:
                log.info("shared days compacted: %s", changed)
                await self_audit.record(
                    job_actor("compaction"), "shared.compact", "shared tables", shard_days=changed
                )
            return days

        async def ahead_done(report: AheadReport) -> bool:
            metrics.shared_tables_made.inc(len(report.made))
            return await self_audit.record(
                job_actor("sharing"), "sharing.ahead", "shared tables", **report.audit_details()
            )

        async def audit_promotion(report: PromotionReport) -> bool:
            return await self_audit.record(
                job_actor("sharing"), "shared.promote", "owner-days", **report.audit_details()
            )

        compactor = Compactor(metadata, pools, settings.compaction, compaction_metrics)
        search = SearchService(metadata, catalog, owners, pools, settings.search)
        runtime = cls(
            settings,
            metadata,
            catalog,
            pools,
            metrics,
            owners,
            service,
            ByteBudget(ingest.inflight_budget_bytes),
            FlowDeletion(catalog, owners, pools, ingest.retry_after_s),
            Housekeeping(
                idempotency,
                catalog,
                pools,
                ingest.idempotency_keep_hours,
                settings.tail.log_keep_s,
            ),
            search,
            ReportService(metadata, catalog, owners, pools, search, settings.report),
            retention,
            RetentionJob(retention, catalog, settings.retention.interval_s, observe),
            CompactionJob(
                metadata,
                compactor,
                catalog,
                settings.compaction.interval_s,
                audit_compaction,
                shared_compaction,
            ),
            TokenRegistry(metadata, settings.auth, metrics.registry),
            self_audit,
            RowService(metadata, catalog, pools, settings.search),
            TailService(hub, search, owners, settings.tail, metrics),
            commit_signal,
            AheadJob(
                metadata,
                pools,
                catalog,
                settings.shared.days_ahead,
                settings.shared.ahead_interval_s,
                ahead_done,
            ),
            PromotionJob(
                metadata,
                pools,
                catalog,
                settings.shared,
                ingest,
                PromotionMetrics(metrics.registry),
                audit_promotion,
            ),
        )
        catalog.subscribe(runtime.on_catalog)
        caches = CacheEntries(metrics.registry)
        caches.watch("known_tables", lambda: len(writer.tables))
        caches.watch("placements", lambda: len(writer.placements))
        caches.watch("owners", lambda: len(owners))
        caches.watch("owner_days", service.cached_owner_days)
        caches.watch("tail_owners", hub.cached_owners)
        caches.watch("tail_interests", hub.cached_interests)
        return runtime

    async def on_catalog(self, snapshot: CatalogSnapshot) -> None:
        await self.pools.reconcile(snapshot)
        await self._refresh_coordinator_logins(snapshot)
        await self.owners.on_catalog(snapshot)
        await self.auth.on_catalog(snapshot)
        await self.tail.hub.on_catalog(snapshot)
        self.metrics.catalog_version.set(snapshot.version)
        self.metrics.catalog_refreshes.inc()
        self.metrics.shard_state.clear()
        for shard in snapshot.shards.values():
            for state in SHARD_STATES:
                self.metrics.shard_state.labels(shard.name, shard.group, state).set(
                    1 if shard.state == state else 0
                )

    async def _refresh_coordinator_logins(self, snapshot: CatalogSnapshot) -> None:
        """The coordinator's user mappings carry the reader's current password (set anew after a
        change of the password file and a restart, or after an upgrade from mappings that
        logged in as the DSN's user). A failure here costs the fdw path, not the router."""
        for shard in snapshot.shards.values():
            try:
                async with self.metadata.acquire() as connection, connection.transaction():
                    if await fdw.refresh_login(
                        connection, shard.name, self.pools.coordinator_login(shard.dsn)
                    ):
                        log.info("coordinator login for %s set anew", shard.name)
            except DRIVER_ERRORS as exc:
                log.warning("coordinator login for %s not refreshed: %s", shard.name, exc)


class Service(Protocol):
    """A process of its own built on a Runtime (the collector, the syslog listener)."""

    def stop(self) -> None: ...

    async def run(self) -> None: ...


def run_until_signalled(make: Callable[[], Service]) -> int:
    """The service run until SIGTERM or SIGINT."""

    async def main() -> None:
        service = make()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, service.stop)
        await service.run()

    asyncio.run(main())
    return 0


async def close_writer(runtime: Runtime) -> None:
    """What such a service's Runtime opened, closed, the metadata pool last."""
    await runtime.commit_signal.stop()
    await runtime.catalog.stop()
    await runtime.pools.close()
    await runtime.metadata.close()
