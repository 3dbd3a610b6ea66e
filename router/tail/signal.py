"""Tells the routers that a shard committed rows: this router's hub at once, the others by a
NOTIFY on the shard (sent after the commit, outside the writing transaction: a NOTIFY inside
it would make the shard serialise the commits of every writer). At most one NOTIFY per shard
per few milliseconds; a lost one only delays a reader until its next poll."""

from __future__ import annotations

import asyncio
import logging

from router.db.failures import DRIVER_ERRORS, describe
from router.db.pools import ShardPools
from router.tail.hub import CHANNEL, TailHub

log = logging.getLogger(__name__)

NOTIFY_DELAY_S = 0.005


class CommitSignal:
    def __init__(self, hub: TailHub, pools: ShardPools) -> None:
        self._hub = hub
        self._pools = pools
        self._pending: dict[str, asyncio.Task[None]] = {}

    def __call__(self, shard: str) -> None:
        self._hub.wake(shard)
        if shard not in self._pending:
            task = asyncio.get_running_loop().create_task(self._notify(shard))
            self._pending[shard] = task

    async def _notify(self, shard: str) -> None:
        try:
            await asyncio.sleep(NOTIFY_DELAY_S)
            self._pending.pop(shard, None)
            await self._pools.writer(shard).execute(f"NOTIFY {CHANNEL}")
        except DRIVER_ERRORS as exc:
            log.debug("tail: NOTIFY on %s failed: %s", shard, describe(exc))
        except Exception as exc:  # a shard that left the catalog meanwhile, say
            log.debug("tail: NOTIFY on %s not sent: %s", shard, exc)

    async def stop(self) -> None:
        tasks = list(self._pending.values())
        self._pending.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
