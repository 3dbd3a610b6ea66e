"""YCSB's two phases against a ShardlogStore: ``load`` inserts records 0..recordcount-1, ``run``
performs operationcount operations chosen by the workload's proportions, on keys drawn from its
request distribution. threadcount clients run concurrently (asyncio tasks sharing one connection
pool), as YCSB's client threads do."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable

from bench.harness import Progress
from bench.ycsb.generators import (
    AcknowledgedCounter,
    Discrete,
    ScrambledZipfian,
    SkewedLatest,
    UniformLong,
    Zipfian,
)
from bench.ycsb.measurements import OK, Measurements
from bench.ycsb.properties import Workload
from bench.ycsb.store import Outcome, ShardlogStore


class Records:
    """The key space across phases: inserts are numbered in order and acknowledged; ``last`` is
    the newest record every insert up to which was acknowledged."""

    def __init__(self) -> None:
        self.counter = AcknowledgedCounter(0)

    @property
    def count(self) -> int:
        return self.counter.last + 1


def expected_inserts(workload: Workload) -> int:
    """CoreWorkload's guess of new keys in a run (the zipfian key space's headroom): twice the
    inserts the proportions promise."""
    return int(workload.operationcount * workload.insertproportion * 2.0)


def key_chooser(workload: Workload, records: Records, rng: random.Random) -> Callable[[], int]:
    """CoreWorkload.nextKeynum: a key of the request distribution, drawn again while it names a
    record whose insert is not acknowledged yet."""
    present = records.count
    draw: Callable[[], int]
    if workload.requestdistribution == "uniform":
        draw = UniformLong(0, present - 1, rng).next
    elif workload.requestdistribution == "zipfian":
        draw = ScrambledZipfian(0, present + expected_inserts(workload), rng).next
    else:
        draw = SkewedLatest(records.counter, rng).next

    def choose() -> int:
        while True:
            keynum = draw()
            if keynum <= records.counter.last:
                return keynum

    return choose


def scan_lengths(workload: Workload, rng: random.Random) -> Callable[[], int]:
    low, high = workload.minscanlength, workload.maxscanlength
    if workload.scanlengthdistribution == "zipfian":
        return Zipfian(low, high, rng).next
    return UniformLong(low, high, rng).next


async def _timed(measurements: Measurements, name: str, operation: Awaitable[Outcome]) -> Outcome:
    started = time.perf_counter_ns()
    outcome = await operation
    measurements.measure(name, (time.perf_counter_ns() - started) // 1000, outcome.status)
    return outcome


async def _insert(store: ShardlogStore, records: Records, measurements: Measurements) -> None:
    """The next record's insert; acknowledged to the key counter even when it failed (as YCSB
    does: its reads then count the miss)."""
    keynum = records.counter.next()
    try:
        await _timed(measurements, "INSERT", store.write(keynum))
    finally:
        records.counter.acknowledge(keynum)


async def _clients(threads: int, total: int, label: str, one: Callable[[], Awaitable[None]]) -> int:
    """``threads`` clients doing ``one`` operation at a time until ``total`` are done; the
    milliseconds it took."""
    left = total
    progress = Progress(label, total, unit="ops")

    async def client() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await one()
            progress.advance()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(threads)))
    return round((time.perf_counter() - started) * 1000)


async def load(store: ShardlogStore, workload: Workload, records: Records) -> Measurements:
    measurements = Measurements(workload.percentiles, operations=workload.recordcount)

    async def insert() -> None:
        await _insert(store, records, measurements)

    measurements.runtime_ms = await _clients(
        workload.threadcount, workload.recordcount, "load", insert
    )
    return measurements


async def run(
    store: ShardlogStore, workload: Workload, records: Records, seed: int
) -> Measurements:
    rng = random.Random(seed)
    measurements = Measurements(workload.percentiles, operations=workload.operationcount)
    operations = Discrete([(share, name) for name, share in workload.proportions.items()], rng)
    next_key = key_chooser(workload, records, rng)
    next_length = scan_lengths(workload, rng)

    async def read_modify_write() -> None:
        keynum = next_key()
        started = time.perf_counter_ns()
        outcome = await _timed(measurements, "READ", store.read(keynum))
        if outcome.status == OK:
            outcome = await _timed(measurements, "UPDATE", store.write(keynum))
        latency_us = (time.perf_counter_ns() - started) // 1000
        measurements.measure("READ-MODIFY-WRITE", latency_us, outcome.status)

    async def one() -> None:
        operation = operations.next()
        if operation == "READ":
            await _timed(measurements, "READ", store.read(next_key()))
        elif operation == "UPDATE":
            await _timed(measurements, "UPDATE", store.write(next_key()))
        elif operation == "INSERT":
            await _insert(store, records, measurements)
        elif operation == "SCAN":
            await _timed(measurements, "SCAN", store.scan(next_key(), next_length()))
        else:
            await read_modify_write()

    measurements.runtime_ms = await _clients(
        workload.threadcount, workload.operationcount, workload.name, one
    )
    return measurements
