"""Merging the shards' partial aggregates. Every shard returns its groups sorted by the group
key; a k-way merge of those streams brings the partials of one group together, where they
combine exactly (counts and sums add, min and max compare, sketches union). Memory holds one
group per shard, whatever the number of groups."""

from __future__ import annotations

import heapq
import ipaddress
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from router.reports import hll
from router.reports.spec import GroupKey, Metric, ReportSpec

# A group: its key (values that compare as PostgreSQL ordered them) and its metric partials.
Partial = tuple[tuple[Any, ...], list[Any]]
IpKey = tuple[int, int]  # (IP version, address as an integer)


def key_value(value: Any) -> Any:
    """A key column as the merge compares it: an address as (version, integer), which is the
    order of PostgreSQL's inet within one mask length per family."""
    if isinstance(value, ipaddress.IPv4Network | ipaddress.IPv6Network):
        return (value.version, int(value.network_address))
    return value


def metric_value(metric: Metric, value: Any) -> Any:
    if metric.kind in ("count", "sum"):
        return int(value) if isinstance(value, Decimal | int) else 0
    if metric.kind == "distinct":
        return hll.decode(value)
    return value


def partial_of(spec: ReportSpec, record: Sequence[Any]) -> Partial:
    width = len(spec.group_by)
    return (
        tuple(key_value(v) for v in record[:width]),
        [metric_value(m, v) for m, v in zip(spec.metrics, record[width:], strict=True)],
    )


def combine(metric: Metric, left: Any, right: Any) -> Any:
    if metric.kind in ("count", "sum"):
        return left + right
    if metric.kind == "distinct":
        return left.union(right)
    if left is None or right is None:
        return right if left is None else left
    return min(left, right) if metric.kind == "min" else max(left, right)


def identity(metrics: Sequence[Metric]) -> list[Any]:
    """The metrics of no rows at all: the one row of a report without group_by and data."""
    return [
        0 if m.kind in ("count", "sum") else hll.empty() if m.kind == "distinct" else None
        for m in metrics
    ]


async def merge_sorted(streams: Sequence[AsyncIterator[Partial]]) -> AsyncIterator[Partial]:
    """The partials of all streams in key order; reads one ahead per stream."""
    heap: list[tuple[tuple[Any, ...], int, Partial]] = []
    for index, stream in enumerate(streams):
        first = await anext(stream, None)
        if first is not None:
            heap.append((first[0], index, first))
    heapq.heapify(heap)
    while heap:
        _, index, item = heap[0]
        following = await anext(streams[index], None)
        if following is None:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, (following[0], index, following))
        yield item


async def combine_groups(
    merged: AsyncIterator[Partial], metrics: Sequence[Metric]
) -> AsyncIterator[Partial]:
    """Complete groups from a key-ordered stream of partials: equal keys are adjacent."""
    current: Partial | None = None
    async for key, values in merged:
        if current is not None and current[0] == key:
            current = (
                key,
                [combine(m, a, b) for m, a, b in zip(metrics, current[1], values, strict=True)],
            )
            continue
        if current is not None:
            yield current
        current = (key, values)
    if current is not None:
        yield current


def _ip_text(key: GroupKey, value: IpKey) -> str:
    version, number = value
    full = 32 if version == 4 else 128
    length = full if key.prefix is None else min(key.prefix, full)
    network = ipaddress.ip_network((number, length))
    return str(network.network_address) if length == full else str(network)


def _public(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, hll.Sketch):
        return round(value.cardinality())
    return value


def finish(spec: ReportSpec, group: Partial) -> dict[str, Any]:
    """A complete group as the answer shows it."""
    row: dict[str, Any] = {}
    for key, value in zip(spec.group_by, group[0], strict=True):
        if key.column in ("src_ip", "dst_ip"):
            row[key.name] = _ip_text(key, value)
        elif key.column == "proto" and value == -1:
            row[key.name] = None
        else:
            row[key.name] = _public(value)
    for metric, value in zip(spec.metrics, group[1], strict=True):
        row[metric.name] = _public(value)
    return row
