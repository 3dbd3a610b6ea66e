"""The bounded queue between the listener's sockets and the database (the collector's queue,
router/collector/queue.py), with a way to wait for room: a stream (TCP, TLS, RELP) that finds
it full stops reading until a batch leaves, and its sender's TCP window closes (flow control,
nothing dropped); UDP cannot wait and drops. Each item may carry a ticket: a future resolved
when its batch committed (True) or was refused (False), which RELP answers after."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import NamedTuple

from router.collector.queue import FlowQueue
from router.ingest.records import AuditRow


class Pending(NamedTuple):
    row: AuditRow
    tenant: str  # its sender's (router/syslogd/senders.py): the row is written as this tenant
    ticket: asyncio.Future[bool] | None = None


class SyslogQueue(FlowQueue[Pending]):
    def __init__(self, capacity: int, batch: int, flush_s: float) -> None:
        super().__init__(capacity, batch, flush_s)
        self.capacity = capacity
        self._room = asyncio.Event()

    async def put(self, items: Sequence[Pending]) -> None:
        """Every item queued, waiting for room as long as it takes."""
        while items:
            room = self.capacity - len(self)
            if room <= 0:
                self._room.clear()
                await self._room.wait()
                continue
            self.offer(items[:room])
            items = items[room:]

    def _pop(self) -> list[Pending]:
        batch = super()._pop()
        self._room.set()
        return batch
