"""The loop that empties the collector's queue into the database: a batch at a time, each
written through the flow write path (router/collector/sink.py) and retried under the same
idempotency key while its shards are unavailable (a retry never stores a flow twice). While a
batch waits for its retry the queue keeps filling and, once full, drops new flows and counts
them: the collector never holds more than the queue's bound. A batch that cannot be written
for another reason (a flow the write path refuses) is dropped and counted, never retried
forever."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

from router.collector.intake import CollectorMetrics
from router.collector.queue import FlowQueue
from router.collector.sink import Batch, Exported, write_batch
from router.errors import ShardlogError, Unavailable
from router.ingest.service import IngestService

log = logging.getLogger(__name__)

RETRY_PAUSE_S = 1.0


class QueueWriter:
    def __init__(
        self,
        ingest: IngestService,
        queue: FlowQueue[Exported],
        metrics: CollectorMetrics,
        retry_pause_s: float = RETRY_PAUSE_S,
    ) -> None:
        self._ingest = ingest
        self._queue = queue
        self._metrics = metrics
        self._retry_pause_s = retry_pause_s
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            flows = await self._queue.take()
            self._metrics.queued.set(len(self._queue))
            await self.write(Batch(flows))

    async def write(self, batch: Batch) -> None:
        """The batch written, retried while shards are unavailable."""
        while True:
            try:
                await write_batch(self._ingest, batch)
                return
            except Unavailable as exc:
                log.warning("collector: a batch of %d flows waits: %s", len(batch.flows), exc)
                await asyncio.sleep(self._retry_pause_s)
            except ShardlogError as exc:
                log.error("collector: a batch of %d flows refused: %s", len(batch.flows), exc)
                refused = Counter(flow.exporter for flow in batch.flows)
                for exporter, count in refused.items():
                    self._metrics.dropped.labels(exporter, "refused by the write path").inc(count)
                return
