"""The loop that empties the collector's queue into the database: a batch at a time, each
written through the flow write path (router/collector/sink.py) and retried under the same
idempotency key while its shards are unavailable (a retry never stores a flow twice). While a
batch waits for its retry the queue keeps filling and, once full, drops new flows and counts
them: the collector never holds more than the queue's bound. A batch that cannot be written
for another reason (a flow the write path refuses) is dropped and counted, never retried
forever."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
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
        # A batch is being written: stopping now would leave its outcome unknown.
        self.writing = False
        self._written = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def drain(self, deadline_s: float) -> int:
        """Waits until the queue is written (at most ``deadline_s``); the flows left."""
        ends = time.monotonic() + deadline_s
        while (len(self._queue) or self.writing) and time.monotonic() < ends:
            self._written.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._written.wait(), ends - time.monotonic())
        return len(self._queue)

    async def stop(self) -> None:
        """Cancelled: call it when the queue is empty and no batch is being written."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            flows = await self._queue.take()
            self._metrics.queued.set(len(self._queue))
            self.writing = True
            try:
                await self.write(Batch(flows))
            finally:
                self.writing = False
                self._written.set()

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
