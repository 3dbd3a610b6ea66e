"""The bounded queue between the collector's sockets and the database. UDP cannot push back:
when the database is slower than the exporters (or a shard group is down), the flows that do
not fit are dropped at once and counted (the caller counts them per bounded exporter label),
never buffered without bound. The
writer takes batches of at most ``batch`` flows, the oldest first, as soon as a batch is full
or the oldest flow waited ``flush_s``."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Sequence
from typing import Generic, TypeVar

T = TypeVar("T")


class FlowQueue(Generic[T]):
    def __init__(self, capacity: int, batch: int, flush_s: float) -> None:
        self._capacity = capacity
        self._batch = batch
        self._flush_s = flush_s
        self._items: deque[T] = deque()
        self._oldest: float | None = None
        self._ready = asyncio.Event()
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._items)

    def offer(self, items: Sequence[T]) -> int:
        """Enqueue what fits of ``items``; the number dropped."""
        room = self._capacity - len(self._items)
        taken = items if len(items) <= room else items[: max(room, 0)]
        dropped = len(items) - len(taken)
        self.dropped += dropped
        if taken:
            if not self._items:
                # A waiting writer starts the flush interval's clock now.
                self._oldest = time.monotonic()
                self._ready.set()
            self._items.extend(taken)
            if len(self._items) >= self._batch:
                self._ready.set()
        return dropped

    async def take(self) -> list[T]:
        """The next batch: full, or whatever waited ``flush_s`` (never empty)."""
        while True:
            if len(self._items) >= self._batch:
                return self._pop()
            if self._items and self._oldest is not None:
                wait = self._oldest + self._flush_s - time.monotonic()
                if wait <= 0:
                    return self._pop()
            else:
                wait = None
            self._ready.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ready.wait(), wait)

    def _pop(self) -> list[T]:
        count = min(self._batch, len(self._items))
        batch = [self._items.popleft() for _ in range(count)]
        self._oldest = time.monotonic() if self._items else None
        return batch
