"""What a running router holds: its settings, the metadata pool, the catalog cache, the shard
pools and its metrics. Built by the app's lifespan, handed to routes by dependency."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from router.catalog.cache import CatalogCache
from router.catalog.snapshot import SHARD_STATES, CatalogSnapshot
from router.db.pools import ShardPools
from router.metrics import Metrics
from router.settings import Settings


@dataclass
class Runtime:
    settings: Settings
    metadata: asyncpg.Pool
    catalog: CatalogCache
    pools: ShardPools
    metrics: Metrics

    async def on_catalog(self, snapshot: CatalogSnapshot) -> None:
        await self.pools.reconcile(snapshot)
        self.metrics.catalog_version.set(snapshot.version)
        self.metrics.catalog_refreshes.inc()
        self.metrics.shard_state.clear()
        for shard in snapshot.shards.values():
            for state in SHARD_STATES:
                self.metrics.shard_state.labels(shard.name, shard.group, state).set(
                    1 if shard.state == state else 0
                )
