"""Exports: every match of a search, streamed as NDJSON or CSV. The shards render each row's
line (router/search/lines.py) and read them in (ts, owner id, id) order a batch at a time; the
router merges the shards a round at a time (the rows up to the smallest last position any
shard has buffered, sorted together by ts: runs already in order, so the sort is a C merge)
and writes the lines' bytes in chunks of at least 256 KiB. No Python code runs per row: a
round is sorted, escaped and joined by whole lists, in C. Memory holds about two batches per
shard (the next one is read ahead).
"""

from __future__ import annotations

import asyncio
import itertools
from bisect import bisect_left, bisect_right
from collections.abc import AsyncIterator, Sequence
from operator import itemgetter
from typing import Any

from router.search.lines import BODIES, ExportFormat
from router.search.streams import Batches, Buffered

__all__ = ["ExportFormat", "merge_rounds", "write"]

Record = Sequence[Any]
# What each row of an export statement holds (router/search/lines.py's OUTPUT): the merge's
# key (ts), then its line's pieces.
_TS = itemgetter(0)
_HEAD, _BODY, _TAIL = itemgetter(1), itemgetter(2), itemgetter(3)
_CHUNK_BYTES = 256 * 1024


class _Shard(Buffered):
    def __init__(self, name: str, batches: Batches) -> None:
        super().__init__(batches)
        self.name = name

    def last(self) -> tuple[Any, str]:
        return (self.rows[-1][0], self.name)


def _cut_descending(rows: Sequence[Record], ts: Any, inclusive: bool) -> int:
    """How many of ``rows`` (ts descending) come before ``ts`` in that order: those with a
    later ts, and with ``inclusive`` those at ``ts`` too."""
    low, high = 0, len(rows)
    while low < high:
        middle = (low + high) // 2
        value = rows[middle][0]
        if value > ts or (inclusive and value == ts):
            low = middle + 1
        else:
            high = middle
    return low


async def merge_rounds(
    streams: Sequence[tuple[str, Batches]], descending: bool
) -> AsyncIterator[list[tuple[str, list[Record]]]]:
    """Rounds of rows in (ts, shard, owner id, id) order (reversed when ``descending``; each
    shard's stream comes in (ts, owner id, id) order and rounds are cut by (ts, shard)): each
    round is (shard, rows) runs that, concatenated and stably sorted by ts, are in that order."""
    shards = sorted((_Shard(n, s) for n, s in streams), key=lambda s: s.name, reverse=descending)
    while True:
        await asyncio.gather(*(s.refill() for s in shards if not s.rows))
        shards = [s for s in shards if not s.exhausted]
        if not shards:
            return
        horizon = max(s.last() for s in shards) if descending else min(s.last() for s in shards)
        ts, name = horizon
        runs: list[tuple[str, list[Record]]] = []
        for shard in shards:
            rows = shard.rows
            if shard.name == name:
                cut = len(rows)
            elif descending:
                cut = _cut_descending(rows, ts, inclusive=shard.name > name)
            elif shard.name < name:
                cut = bisect_right(rows, ts, key=_TS)
            else:
                cut = bisect_left(rows, ts, key=_TS)
            if cut:
                runs.append((shard.name, list(rows[:cut])))
                shard.rows = rows[cut:]
        yield runs


async def write(
    streams: Sequence[tuple[str, Batches]],
    descending: bool,
    format: ExportFormat,
    head: bytes = b"",
) -> AsyncIterator[bytes]:
    """``head``, then every line of the merged streams, in chunks of at least 256 KiB (a
    round's lines, or several rounds'). A round is put together by whole lists: its rows sorted,
    their free text escaped in one call, the pieces of every line joined in one."""
    bodies = BODIES[format]
    pending = [head] if head else []
    size = len(head)
    async for runs in merge_rounds(streams, descending):
        rows = list(itertools.chain.from_iterable(run for _, run in runs))
        rows.sort(key=_TS, reverse=descending)
        pieces: list[bytes] = [b""] * (3 * len(rows))
        pieces[0::3] = map(_HEAD, rows)
        pieces[1::3] = bodies(list(map(_BODY, rows)))
        pieces[2::3] = map(_TAIL, rows)
        chunk = b"".join(pieces)
        if not pending and len(chunk) >= _CHUNK_BYTES:
            yield chunk
            continue
        pending.append(chunk)
        size += len(chunk)
        if size >= _CHUNK_BYTES:
            yield b"".join(pending)
            pending, size = [], 0
    if pending:
        yield b"".join(pending)
