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

from router.reports.spec import Metric

Row = dict[str, Any]
SortKey = tuple[float, int]
# Below every value: a metric that is NULL (min or max of a group without rows) sorts first.
LOWEST = -1e300
# What a row costs in memory beyond its JSON text: the dict and its objects.
ROW_OVERHEAD_BYTES = 400


def sort_value(metric: Metric, row: Row) -> float:
    value = row[metric.name]
    if value is None:
        return LOWEST
    if metric.kind in ("min", "max"):
        return datetime.fromisoformat(value).timestamp()
    return value  # type: ignore[no-any-return]  # an int: exact, however large


def _key(metric: Metric, descending: bool, row: Row, sequence: int) -> SortKey:
    value = sort_value(metric, row)
    return (-value if descending else value, sequence)


async def top(rows: AsyncIterator[Row], metric: Metric, descending: bool, limit: int) -> list[Row]:
    """The first ``limit`` rows by ``metric``, holding at most ``limit`` at a time."""
    heap: list[tuple[tuple[float, int], Row]] = []  # max-heap on the sort key, negated
    sequence = 0
    async for row in rows:
        value, seq = _key(metric, descending, row, sequence)
        sequence += 1
        item = ((-value, -seq), row)
        if len(heap) < limit:
            heapq.heappush(heap, item)
        elif item[0] > heap[0][0]:
            heapq.heapreplace(heap, item)
    return [row for _, row in sorted(heap, key=lambda item: item[0], reverse=True)]


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
