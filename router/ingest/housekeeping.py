"""Forgets idempotency records and the shards' ledger rows once they are older than
SHARDLOG_INGEST__IDEMPOTENCY_KEEP_HOURS (a ledger row is never younger than its key, so both
go together), and the shards' tail log lines older than SHARDLOG_TAIL__LOG_KEEP_S. Several
routers doing this at once is harmless."""

from __future__ import annotations

import logging

from router.catalog.cache import CatalogCache
from router.db.failures import DRIVER_ERRORS, describe
from router.db.pools import ShardPools
from router.ingest.idempotency import IdempotencyStore
from router.periodic import PeriodicTask
from router.tail import sql as tail_sql

log = logging.getLogger(__name__)

_ERRORS = DRIVER_ERRORS


class Housekeeping:
    def __init__(
        self,
        idempotency: IdempotencyStore,
        catalog: CatalogCache,
        pools: ShardPools,
        keep_hours: float,
        tail_keep_s: float,
    ) -> None:
        self._idempotency = idempotency
        self._catalog = catalog
        self._pools = pools
        self._keep_hours = keep_hours
        self._tail_keep_s = tail_keep_s
        self._periodic = PeriodicTask(
            "idempotency clean-up", lambda: self.interval_s, self.run_once
        )

    @property
    def interval_s(self) -> float:
        return min(600.0, self._keep_hours * 3600 / 4, self._tail_keep_s / 2)

    async def run_once(self) -> dict[str, int]:
        removed = {"keys": await self._idempotency.forget_older_than(self._keep_hours)}
        for shard in self._catalog.snapshot.shards.values():
            if shard.state == "down":
                continue
            writer = self._pools.writer(shard.name)
            try:
                status = await writer.execute(
                    "DELETE FROM ingest_ledger "
                    "WHERE committed_at < now() - make_interval(secs => $1)",
                    self._keep_hours * 3600,
                )
                tail = await writer.execute(tail_sql.prune_sql(), self._tail_keep_s)
            except _ERRORS as exc:
                log.warning("ledger clean-up on %s failed: %s", shard.name, describe(exc))
                continue
            removed[shard.name] = int(status.split()[-1])
            removed[f"{shard.name} tail log"] = int(tail.split()[-1])
        return removed

    def start(self) -> None:
        self._periodic.start()

    async def stop(self) -> None:
        await self._periodic.stop()
