"""The collector's bounded queue (router/collector/queue.py): drops what does not fit, counted;
batches full or after the flush interval, oldest first."""

from __future__ import annotations

import asyncio
import time

from router.collector.queue import FlowQueue


def test_what_does_not_fit_is_dropped_and_counted() -> None:
    queue: FlowQueue[int] = FlowQueue(capacity=5, batch=10, flush_s=1)
    assert queue.offer([1, 2, 3]) == 0
    assert queue.offer([4, 5, 6, 7]) == 2
    assert queue.offer([8]) == 1
    assert len(queue) == 5
    assert queue.dropped == 3


async def test_a_full_batch_comes_at_once_oldest_first() -> None:
    queue: FlowQueue[int] = FlowQueue(capacity=100, batch=3, flush_s=60)
    queue.offer([1, 2, 3, 4])
    assert await asyncio.wait_for(queue.take(), 1) == [1, 2, 3]
    assert len(queue) == 1


async def test_a_partial_batch_comes_after_the_flush_interval() -> None:
    queue: FlowQueue[int] = FlowQueue(capacity=100, batch=50, flush_s=0.2)
    began = time.monotonic()
    queue.offer([1, 2])
    assert await asyncio.wait_for(queue.take(), 2) == [1, 2]
    assert time.monotonic() - began >= 0.2


async def test_a_waiting_writer_wakes_when_a_batch_fills() -> None:
    queue: FlowQueue[int] = FlowQueue(capacity=100, batch=2, flush_s=60)
    taker = asyncio.ensure_future(queue.take())
    await asyncio.sleep(0.05)
    assert not taker.done()
    queue.offer([7, 8])
    assert await asyncio.wait_for(taker, 1) == [7, 8]


async def test_a_waiting_writer_gets_a_partial_batch_after_the_flush_interval() -> None:
    queue: FlowQueue[int] = FlowQueue(capacity=100, batch=50, flush_s=0.2)
    taker = asyncio.ensure_future(queue.take())
    await asyncio.sleep(0.05)
    queue.offer([1])
    assert await asyncio.wait_for(taker, 2) == [1]
