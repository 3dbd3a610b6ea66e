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
from typing import Generic, TypeVar

from prometheus_client import Gauge

from router.collector.intake import CollectorMetrics
from router.collector.queue import FlowQueue
from router.collector.sink import Batch, Exported, write_batch
from router.errors import BUG_MARKER, ShardlogError, Unavailable
from router.ingest.service import IngestService

log = logging.getLogger(__name__)

RETRY_PAUSE_S = 1.0
T = TypeVar("T")


class BatchLoop(Generic[T]):
    """Takes a queue's batches, one at a time, and hands each to ``write_items``; ``drain``
    waits for the queue to empty, ``stop`` ends the loop. An unexpected error is logged with the
    BUG marker and its batch handed to ``abandon``; the loop goes on. Shared by the collector
    and the syslog listener (router/syslogd/writer.py)."""

    def __init__(self, queue: FlowQueue[T], queued: Gauge) -> None:
        self._queue = queue
        self._queued = queued
        self._task: asyncio.Task[None] | None = None
        # A batch is being written: stopping now would leave its outcome unknown.
        self.writing = False
        self._written = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def drain(self, deadline_s: float) -> int:
        """Waits until the queue is written (at most ``deadline_s``); the items left."""
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
            items = await self._queue.take()
            self._queued.set(len(self._queue))
            self.writing = True
            try:
                await self.write_items(items)
            except Exception:
                log.exception("%s: a batch of %d failed", BUG_MARKER, len(items))
                self.abandon(items)
            finally:
                self.writing = False
                self._written.set()

    async def write_items(self, items: list[T]) -> None:
        raise NotImplementedError

    def abandon(self, items: list[T]) -> None:
        """What an unexpected error left unwritten."""


class QueueWriter(BatchLoop[Exported]):
    def __init__(
        self,
        ingest: IngestService,
        queue: FlowQueue[Exported],
        metrics: CollectorMetrics,
        retry_pause_s: float = RETRY_PAUSE_S,
    ) -> None:
        super().__init__(queue, metrics.queued)
        self._ingest = ingest
        self._metrics = metrics
        self._retry_pause_s = retry_pause_s

    async def write_items(self, items: list[Exported]) -> None:
        await self.write(Batch(items))

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
                    label = self._metrics.exporter(exporter)
                    self._metrics.dropped.labels(label, "refused by the write path").inc(count)
                return
