"""Streaming k-way merge of sorted result lists into one order on (ts, shard, owner id, id)
with a fixed tie-break: the shards' lists, or one shard's lists of several statements."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

Row = dict[str, Any]


def sort_key(row: Row) -> tuple[Any, str, int, int]:
    return (row["ts"], row["shard"], row["owner_id"], row["id"])


def merge(
    streams: Sequence[Iterable[Any]],
    descending: bool,
    limit: int,
    key: Callable[[Any], Any] = sort_key,
) -> list[Any]:
    """The first ``limit`` rows of all streams in ``key`` order (reversed when
    ``descending``); reads no further into any stream than it must."""
    merged: Iterator[Any] = heapq.merge(*streams, key=key, reverse=descending)
    return list(itertools.islice(merged, limit))
