"""Ordering complete groups by a metric. With a limit: a bounded heap of N over every complete
group, so the top N is exact. Without one: an external sort, sorted runs in memory up to a
budget and spilled to temporary files past it, merged from disk (memory stays near the
budget, whatever the number of groups). Ties go by group key (the order groups arrive in)."""

from __future__ import annotations

import heapq
import os
import tempfile
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import orjson

from router.reports import hll
from router.reports.merge import Group
from router.reports.spec import Metric

Row = dict[str, Any]
SortKey = tuple[float, int]
# Below every value: a metric that is NULL (min or max of a group without rows) sorts first.
LOWEST = -1e300
# What a row costs in memory beyond its JSON text: the dict and its objects.
ROW_OVERHEAD_BYTES = 400


def _comparable(metric: Metric, value: Any) -> float | int:
    """A metric's value as ordering compares it: numbers as they are (exact, however large),
    times as epoch seconds, sketches as their estimate, NULL below everything."""
    if value is None:
        return LOWEST
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        return datetime.fromisoformat(value).timestamp()
    if isinstance(value, hll.Sketch):
        return round(value.cardinality())
    return value  # type: ignore[no-any-return]  # int or Decimal


def sort_value(metric: Metric, row: Row) -> float:
    return _comparable(metric, row[metric.name])


def _key(metric: Metric, descending: bool, row: Row, sequence: int) -> SortKey:
    value = sort_value(metric, row)
    return (-value if descending else value, sequence)


async def top(
    batches: AsyncIterator[list[Group]], index: int, metric: Metric, descending: bool, limit: int
) -> list[Group]:
    """The first ``limit`` complete groups by metric ``index``, holding at most ``limit``."""
    # A min-heap of the best so far: its root is the first to go. Ties go to the group that
    # came first (key order), hence the negated sequence.
    heap: list[tuple[float | int, int, Group]] = []
    sign = 1 if descending else -1
    sequence = 0
    async for batch in batches:
        for group in batch:
            item = (sign * _comparable(metric, group[1][index]), -sequence, group)
            sequence += 1
            if len(heap) < limit:
                heapq.heappush(heap, item)
            elif item[:2] > heap[0][:2]:
                heapq.heapreplace(heap, item)
    return [group for *_, group in sorted(heap, key=lambda item: item[:2], reverse=True)]


class ExternalSort:
    """Rows sorted by a metric; past ``budget_bytes`` of rows held, a sorted run is written to
    a temporary file. ``sorted()`` merges the runs; the files are removed when it ends."""

    def __init__(
        self, metric: Metric, descending: bool, budget_bytes: int, directory: Path | None
    ) -> None:
        self._metric = metric
        self._descending = descending
        self._budget = budget_bytes
        self._directory = directory
        self._held: list[tuple[SortKey, Row]] = []
        self._held_bytes = 0
        self._runs: list[IO[bytes]] = []
        self._sequence = 0

    @property
    def spilled_runs(self) -> int:
        return len(self._runs)

    def add(self, row: Row) -> None:
        self._held.append((_key(self._metric, self._descending, row, self._sequence), row))
        self._sequence += 1
        self._held_bytes += len(orjson.dumps(row)) + ROW_OVERHEAD_BYTES
        if self._held_bytes > self._budget:
            self._spill()

    def _spill(self) -> None:
        self._held.sort(key=lambda item: item[0])
        run = tempfile.TemporaryFile(dir=self._directory, prefix="shardlog-report-")  # noqa: SIM115
        for key, row in self._held:
            run.write(orjson.dumps([key[0], key[1], row]) + b"\n")
        run.flush()
        run.seek(0)
        self._runs.append(run)
        self._held, self._held_bytes = [], 0

    @staticmethod
    def _read(run: IO[bytes]) -> Iterator[tuple[SortKey, Row]]:
        for line in run:
            value, sequence, row = orjson.loads(line)
            yield (value, sequence), row

    def sorted(self) -> Iterator[Row]:
        self._held.sort(key=lambda item: item[0])
        try:
            if not self._runs:
                for _, row in self._held:
                    yield row
                return
            streams = [self._read(run) for run in self._runs] + [iter(self._held)]
            for _, row in heapq.merge(*streams, key=lambda item: item[0]):
                yield row
        finally:
            self.close()

    def close(self) -> None:
        for run in self._runs:
            run.close()
        self._runs, self._held = [], []


def spill_directory(configured: Path | None) -> Path:
    directory = configured or Path(tempfile.gettempdir())
    os.makedirs(directory, exist_ok=True)
    return directory
