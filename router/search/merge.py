"""Streaming k-way merge of per-shard result lists, each already sorted by (ts, id) in the
query's direction, into one order on (ts, shard, id) with a fixed tie-break."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

Row = dict[str, Any]


def sort_key(row: Row) -> tuple[Any, str, int]:
    return (row["ts"], row["shard"], row["id"])


def merge(streams: Sequence[Iterable[Row]], descending: bool, limit: int) -> list[Row]:
    """The first ``limit`` rows of all streams in (ts, shard, id) order (reversed when
    ``descending``); reads no further into any stream than it must."""
    merged: Iterator[Row] = heapq.merge(*streams, key=sort_key, reverse=descending)
    return list(itertools.islice(merged, limit))
