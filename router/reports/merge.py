"""Merging the shards' partial aggregates. Every shard returns its groups sorted by the group
key, in batches. A round takes, from every stream's buffered batch, the partials up to the
smallest last key buffered (the horizon): no stream can still hold a key at or below it, so
those groups are complete. The round's partials are sorted together (their runs are already
sorted, which the sort exploits) and equal keys combine exactly: counts and sums add, min and
max compare, sketches union. Memory holds about one batch per stream, whatever the number of
groups, and the per-row work happens in C (sort, groupby, itemgetter) rather than in a Python
loop per partial."""

from __future__ import annotations

import asyncio
from bisect import bisect_right
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from itertools import groupby
from operator import itemgetter
from typing import Any

from router.db import inet
from router.reports import hll
from router.reports.spec import GroupKey, Metric, ReportSpec
from router.search.streams import Batches, Buffered

# A shard's partial row (an asyncpg Record, or any sequence): the key columns, then the metrics.
PartialRow = Sequence[Any]
# A complete group: its key (one value, or a tuple of them for several key columns; () for
# none) and its combined metrics.
Group = tuple[Any, tuple[Any, ...]]


def _no_key(_row: PartialRow) -> tuple[()]:
    return ()


def _reducer(metric: Metric, column: int) -> Callable[[list[PartialRow]], Any]:
    read = itemgetter(column)
    if metric.kind in ("count", "sum"):
        return lambda rows: sum(map(read, rows))
    if metric.kind == "distinct":

        def union(rows: list[PartialRow]) -> hll.Sketch:
            sketch = hll.decode(rows[0][column])
            for row in rows[1:]:
                sketch = sketch.union(hll.decode(row[column]))
            return sketch

        return union
    pick = min if metric.kind == "min" else max

    def extreme(rows: list[PartialRow]) -> Any:
        values = [v for v in map(read, rows) if v is not None]
        return pick(values) if values else None

    return extreme


@dataclass(frozen=True)
class Layout:
    """Where a partial row's key and metrics are, and how each metric combines."""

    key: Callable[[PartialRow], Any]
    reducers: tuple[Callable[[list[PartialRow]], Any], ...]

    @classmethod
    def of(cls, spec: ReportSpec) -> Layout:
        width = len(spec.group_by)
        key: Callable[[PartialRow], Any] = _no_key if width == 0 else itemgetter(*range(width))
        reducers = tuple(_reducer(m, width + i) for i, m in enumerate(spec.metrics))
        return cls(key, reducers)

    def combine(self, rows: list[PartialRow]) -> list[Group]:
        """Complete groups of ``rows`` (every partial of each group among them), in key order."""
        rows.sort(key=self.key)
        reducers = self.reducers
        return [
            (key, tuple(reduce(members) for reduce in reducers))
            for key, grouped in groupby(rows, self.key)
            for members in (list(grouped),)
        ]


async def merge_complete(streams: Sequence[Batches], layout: Layout) -> AsyncIterator[list[Group]]:
    """Complete groups of all streams, in key order, a round at a time."""
    buffered = [Buffered(s) for s in streams]
    key = layout.key
    while True:
        empty = [b for b in buffered if not b.rows]
        if empty:
            await asyncio.gather(*(b.refill() for b in empty))
            buffered = [b for b in buffered if not b.exhausted]
        if not buffered:
            return
        horizon = min(key(b.rows[-1]) for b in buffered)
        taken: list[PartialRow] = []
        for b in buffered:
            cut = bisect_right(b.rows, horizon, key=key)
            taken += b.rows[:cut]
            b.rows = b.rows[cut:]
        yield layout.combine(taken)


def identity(metrics: Sequence[Metric]) -> tuple[Any, ...]:
    """The metrics of no rows at all: the one row of a report without group_by and data."""
    return tuple(
        0 if m.kind in ("count", "sum") else hll.empty() if m.kind == "distinct" else None
        for m in metrics
    )


def _public(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, hll.Sketch):
        return round(value.cardinality())
    if isinstance(value, Decimal):
        return int(value)
    return value


def _key_text(key: GroupKey, value: Any) -> Any:
    if key.column in ("src_ip", "dst_ip"):
        return inet.decode(value)  # the inet's wire form: the address, or network/length
    if key.column == "proto" and value == -1:
        return None
    return _public(value)


def finish(spec: ReportSpec, group: Group) -> dict[str, Any]:
    """A complete group as the answer shows it."""
    key, values = group
    parts = (key,) if len(spec.group_by) == 1 else key
    row = {k.name: _key_text(k, v) for k, v in zip(spec.group_by, parts, strict=True)}
    for metric, value in zip(spec.metrics, values, strict=True):
        row[metric.name] = _public(value)
    return row
