"""A page from the shards' answers, with as little Python per row as the answer allows.

Each shard answers up to ``limit + 1`` rows, so a page of 1,000 rows over 6 shards reads about
6,000; only the first ``limit + 1`` of the merge become rows and items (the others stay the
driver's records). The page's JSON is written by orjson in one call, in the order and the form
the answer models (router/models/search.py) give it, so a page reads byte for byte as the
models would have written it; the bytes of a large page are made between yields to the event
loop, so that writes and small requests keep their turn while a large page is built. Pure but
for those yields: no I/O."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import orjson

from router.db.names import Kind
from router.search import lines

# Pages up to this many rows ask every shard for all (shard_share): a second round trip
# costs more than decoding a few hundred rows.
SMALL_PAGE = 256
# Items made between two yields to the event loop: about a millisecond of work.
CHUNK = 500
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


def _keyed(shard: str, records: Sequence[Any]) -> Iterator[tuple[Any, str, int, int, Any]]:
    """One shard's records with the merge's key in front: (ts, shard, owner id, id)."""
    for record in records:
        yield record["ts"], shard, record["owner_id"], record["id"], record


def _key(entry: tuple[Any, str, int, int, Any]) -> tuple[Any, str, int, int]:
    return entry[:4]


def merge_records(
    answers: Sequence[tuple[str, Sequence[Any]]], descending: bool, limit: int
) -> list[tuple[str, Any]]:
    """The first ``limit`` (shard, record) of the shards' answers in (ts, shard, owner id, id)
    order (reversed when ``descending``), each shard's answer already in that order; records
    past them are not looked at."""
    merged = heapq.merge(
        *(_keyed(shard, records) for shard, records in answers), key=_key, reverse=descending
    )
    return [(entry[1], entry[4]) for entry in itertools.islice(merged, limit)]


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
    ``wanted`` rows of the merge are those of all the shards."""
    taken: dict[str, int] = {}
    for shard, _ in merge_records(list(answers.items()), descending, wanted):
        taken[shard] = taken.get(shard, 0) + 1
    return {
        shard: (rows[-1], wanted - len(rows))
        for shard, rows in answers.items()
        if shard in full and rows and taken.get(shard, 0) == len(rows) < wanted
    }


async def items_of(rows: list[Any], make: Callable[[Any], dict[str, Any]]) -> list[dict[str, Any]]:
    """``make`` of every row, a chunk at a time, with a yield to the event loop after each
    chunk of a large page."""
    made: list[dict[str, Any]] = []
    for start in range(0, len(rows), CHUNK):
        if start:
            await asyncio.sleep(0)
        made += [make(row) for row in rows[start : start + CHUNK]]
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
    """A search page's JSON. Items whose keys are not in their model's order already (flows)
    are put in it a chunk at a time, with a yield to the event loop after each chunk."""
    fields = FIELDS[kind]
    items: list[dict[str, Any]] = []
    found: list[dict[str, Any]] = page["items"]
    for start in range(0, len(found), CHUNK):
        if start:
            await asyncio.sleep(0)
        items += [
            item if tuple(item) == fields else ordered(kind, item)
            for item in found[start : start + CHUNK]
        ]
    body = {name: page[name] for name in PAGE_FIELDS}
    body["items"] = items
    return orjson.dumps(body)
