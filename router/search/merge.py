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


def within_shard(record: Any) -> tuple[Any, int, int]:
    """The order of one shard's rows (the shard is the same for all)."""
    return (record["ts"], record["owner_id"], record["id"])


def keep_first(limit: int, descending: bool) -> Callable[[list[Any], list[Any]], list[Any]]:
    """A shard's first ``limit`` rows of its statements' answers so far."""

    def combine(kept: list[Any], more: list[Any]) -> list[Any]:
        if not kept:
            return more
        return merge([kept, more], descending, limit, key=within_shard)

    return combine
