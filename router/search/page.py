"""A page from the shards' answers, with as little Python per row as the answer allows.

Each shard answers up to ``limit + 1`` rows, so a page of 1,000 rows over 6 shards reads about
6,000; only the first ``limit + 1`` of the merge become rows and items (the others stay the
driver's records). The page's JSON is written by orjson, in the order and the form the answer
models (router/models/search.py) give it, so a page reads byte for byte as the models would
have written it. The merge, the rows, the items and the bytes of a large page are each made a
chunk at a time, yielding to the event loop whenever the work has held it for 50 µs, so that
writes and small requests keep their turn while a large page is built;
whether a shard must be asked for more is found by binary search, not by another merge. Pure
but for those yields: no I/O."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import orjson

from router.db.names import Kind
from router.search import lines

R = TypeVar("R")

# Pages up to this many rows ask every shard for all (shard_share): a second round trip
# costs more than decoding a few hundred rows.
SMALL_PAGE = 256
# Rows merged or items made between two looks at the clock, and items written by one
# orjson call (cheaper per row: a call per 32 items cost twice one call for the page).
CHUNK = 32
WRITE_CHUNK = 256
# How long a page's work may hold the event loop before it yields. A request arriving while a
# large page is built waits for the stretch in hand at each of its turns on the loop
# (bench/search/mixed, a 10-row write beside a pager: 4-5x its time alone when a page yielded
# every 500 rows, 3x every 100, 2x every 100 µs, 1.9x every 50 µs). Each yield costs a few µs:
# at 50 µs a 10,000-row page alone takes ~10 % more router CPU than in one stretch.
TURN_S = 0.00005


class Turns:
    """Yields to the event loop once the work since the last yield has held it for TURN_S:
    cheap steps yield seldom, and no step holds the loop for long."""

    __slots__ = ("_since",)

    def __init__(self) -> None:
        self._since = time.perf_counter()

    async def take(self) -> None:
        if time.perf_counter() - self._since >= TURN_S:
            await asyncio.sleep(0)
            self._since = time.perf_counter()


# The keys of an item in the order the answer models write them (AuditItem, FlowItem).
AUDIT_FIELDS = ("ts", "id", "content", "attrs", "shard", "owner", "ref")
# The export's fields (router/search/lines.py) with last_seen second, then where the row is.
FLOW_FIELDS = (
    "first_seen",
    "last_seen",
    *(name for name in lines.FLOW_FIELDS[1:] if name != "last_seen"),
    "shard",
    "switch",
    "ref",
)
FIELDS: dict[Kind, tuple[str, ...]] = {"audit": AUDIT_FIELDS, "flow": FLOW_FIELDS}
# The keys of a page, as router.models.search.Page orders them.
PAGE_FIELDS = ("items", "next_cursor", "prev_cursor", "count", "partial", "failed_shards")


def _position(shard: str, record: Any) -> tuple[Any, str, int, int]:
    """A record's place in the merge's order: (ts, shard, owner id, id)."""
    return record["ts"], shard, record["owner_id"], record["id"]


def _merged(
    answers: Sequence[tuple[str, Sequence[Any]]], descending: bool
) -> Iterator[tuple[tuple[Any, str, int, int], Any]]:
    """The shards' records as (position, record), in the merge's order, lazily."""
    return heapq.merge(
        *(_positioned(shard, records) for shard, records in answers),
        key=_first,
        reverse=descending,
    )


def _positioned(
    shard: str, records: Sequence[Any]
) -> Iterator[tuple[tuple[Any, str, int, int], Any]]:
    for record in records:
        yield _position(shard, record), record


def _first(entry: tuple[tuple[Any, str, int, int], Any]) -> tuple[Any, str, int, int]:
    return entry[0]


def merge_records(
    answers: Sequence[tuple[str, Sequence[Any]]], descending: bool, limit: int
) -> list[tuple[str, Any]]:
    """The first ``limit`` (shard, record) of the shards' answers in (ts, shard, owner id, id)
    order (reversed when ``descending``), each shard's answer already in that order; records
    past them are not looked at."""
    return [
        (position[1], record)
        for position, record in itertools.islice(_merged(answers, descending), limit)
    ]


async def merged_rows(
    answers: Sequence[tuple[str, Sequence[Any]]],
    descending: bool,
    limit: int,
    make: Callable[[str, Any], R],
) -> list[R]:
    """``make(shard, record)`` of merge_records' pairs, a chunk at a time, yielding to the
    event loop as ``Turns`` allows: the merge and the rows of a 10,000-row page are ~25 ms of
    work."""
    merged = _merged(answers, descending)
    made: list[R] = []
    turns = Turns()
    while len(made) < limit:
        wanted = min(CHUNK, limit - len(made))
        chunk = [make(position[1], record) for position, record in itertools.islice(merged, wanted)]
        made += chunk
        if len(chunk) < wanted:
            break
        await turns.take()
    return made


def shard_share(wanted: int, shards: int) -> int:
    """How many rows a page's first statement asks of each of ``shards`` shards for the first
    ``wanted`` rows of all: twice an even share and a margin, so that a shard holding more than
    its share rarely needs a second statement (short_shards), and the driver decodes about a
    third of the rows that ``wanted`` from every shard would make (a shard's rows past the page
    are read, sent and decoded for nothing). Small pages ask for all."""
    if shards <= 1:
        return wanted
    return min(wanted, max(2 * wanted // shards + 16, SMALL_PAGE))


def short_shards(
    answers: dict[str, list[Any]], full: set[str], descending: bool, wanted: int
) -> dict[str, tuple[Any, int]]:
    """The shards that may hold more of the first ``wanted`` rows than they answered: those
    whose last statement answered all it was asked (``full``) and all of whose rows made it
    into the first ``wanted``; for each, its last row (the next statement continues after it)
    and how many rows the page could still take from it. An empty answer: the first
    ``wanted`` rows of the merge are those of all the shards.

    A shard's rows all make the first ``wanted`` when no more than ``wanted`` rows of all come
    at or before its last one in the merge's order: a binary search in each answer, not a
    merge (which held the event loop ~9 ms for a 10,000-row page)."""
    short: dict[str, tuple[Any, int]] = {}
    for shard, rows in answers.items():
        if shard not in full or not rows or len(rows) >= wanted:
            continue
        last = rows[-1]
        bound = _position(shard, last)
        rank = sum(
            _at_or_before(other, records, bound, descending) for other, records in answers.items()
        )
        if rank <= wanted:
            short[shard] = (last, wanted - len(rows))
    return short


def _at_or_before(
    shard: str, records: Sequence[Any], bound: tuple[Any, ...], descending: bool
) -> int:
    """How many of a shard's ``records`` (in the merge's order) come at or before ``bound``."""
    low, high = 0, len(records)
    while low < high:
        middle = (low + high) // 2
        key = _position(shard, records[middle])
        if (key >= bound) if descending else (key <= bound):
            low = middle + 1
        else:
            high = middle
    return low


async def items_of(rows: list[Any], make: Callable[[Any], dict[str, Any]]) -> list[dict[str, Any]]:
    """``make`` of every row, a chunk at a time, yielding to the event loop as ``Turns``
    allows."""
    made: list[dict[str, Any]] = []
    turns = Turns()
    for start in range(0, len(rows), CHUNK):
        made += [make(row) for row in rows[start : start + CHUNK]]
        await turns.take()
    return made


def ordered(kind: Kind, item: dict[str, Any]) -> dict[str, Any]:
    """An item's keys in the order of its answer model; a key the model does not name is an
    error here, as it would be for the model."""
    fields = FIELDS[kind]
    if item.keys() != set(fields):
        extra = sorted(set(item) ^ set(fields))
        raise ValueError(f"an item of {kind} holds other keys than its model names: {extra}")
    return {name: item[name] for name in fields}


async def encode(kind: Kind, page: dict[str, Any]) -> bytes:
    """A search page's JSON, as ``orjson.dumps`` of the page with its items in their model's
    order would write it. Items whose keys are not in that order already (flows) are put in
    it, and the items are written, a chunk at a time, yielding to the event loop as ``Turns``
    allows: one call for a 10,000-row page held the loop 4-16 ms."""
    fields = FIELDS[kind]
    found: list[dict[str, Any]] = page["items"]
    parts: list[bytes | memoryview] = [b'{"items":[']
    turns = Turns()
    for start in range(0, len(found), WRITE_CHUNK):
        if start:
            parts.append(b",")
        chunk = [
            item if tuple(item) == fields else ordered(kind, item)
            for item in found[start : start + WRITE_CHUNK]
        ]
        parts.append(memoryview(orjson.dumps(chunk))[1:-1])
        await turns.take()
    rest = orjson.dumps({name: page[name] for name in PAGE_FIELDS[1:]})
    parts += [b"],", memoryview(rest)[1:]]
    # Memoryviews, one join: each copy of a large page's bytes cost as much as writing them.
    return b"".join(parts)
