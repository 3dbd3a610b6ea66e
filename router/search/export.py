"""Exports: every match of a search, streamed as NDJSON or CSV. Each shard runs one statement
over its day tables in range, in (ts, owner id, id) order, read through a cursor a batch at a
time (or keyset pages, router/search/service.py, when it has too many tables for one); the
router merges the shards a round at a time (the rows up to the smallest last position any
shard has buffered, sorted together: runs already in order, so the sort is a C merge) and
writes each round as one chunk. No page is planned twice, no row becomes a Python dict on
the way to JSON except the one orjson serialises, and memory holds about one batch per shard.
"""

from __future__ import annotations

import asyncio
import csv
import io
from bisect import bisect_left, bisect_right
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import datetime
from operator import itemgetter
from typing import Any, Literal

import orjson

from router.csv_cells import FORMULA_START, csv_cell
from router.db.ddl import FLOW_STAGE_COLUMNS
from router.search import refs
from router.search.query import AuditQuery, FlowQuery
from router.search.streams import Batches, Buffered

ExportFormat = Literal["ndjson", "csv"]
Record = Sequence[Any]
# What each row of an export statement holds: ts and id first (the merge reads them), the
# owner's id last.
AUDIT_FIELDS = ("ts", "id", "content", "attrs")
FLOW_FIELDS = ("first_seen", "id", *FLOW_STAGE_COLUMNS[:-2], "last_seen")
_TS = itemgetter(0)
_CHUNK_BYTES = 256 * 1024


class _Shard(Buffered):
    def __init__(self, name: str, batches: Batches) -> None:
        super().__init__(batches)
        self.name = name

    def last(self) -> tuple[datetime, str, int]:
        row = self.rows[-1]
        return (row[0], self.name, row[1])


def _cut_descending(rows: Sequence[Record], ts: datetime, inclusive: bool) -> int:
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
        ts, name, _ = horizon
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


Renderer = Callable[[Record, str], Any]


def _audit_item(owners: dict[int, str]) -> Renderer:
    def render(row: Record, shard: str) -> dict[str, Any]:
        attrs = row[3]
        position = {"ts": row[0], "shard": shard, "id": row[1]}
        return {
            "ts": row[0],
            "id": row[1],
            "content": row[2],
            "attrs": None if attrs is None else orjson.Fragment(attrs),
            "shard": shard,
            "owner": owners[row[4]],
            "ref": refs.of_row("audit", row[4], position),
        }

    return render


def _flow_item(owners: dict[int, str]) -> Renderer:
    def render(row: Record, shard: str) -> dict[str, Any]:
        item = dict(zip(FLOW_FIELDS, row, strict=False))
        item["shard"] = shard
        item["switch"] = owners[row[12]]
        item["ref"] = refs.of_row("flow", row[12], {**item, "ts": row[0]})
        return item

    return render


def csv_header(query: AuditQuery | FlowQuery) -> list[str]:
    if isinstance(query, AuditQuery):
        return ["ts", "id", "owner", "shard", "content", "attrs"]
    return [FLOW_FIELDS[0], "switch", "shard", *FLOW_FIELDS[1:]]


def _csv_row(query: AuditQuery | FlowQuery, owners: dict[int, str]) -> Renderer:
    cells = {ident: csv_cell(key) for ident, key in owners.items()}
    if isinstance(query, AuditQuery):

        def audit(row: Record, shard: str) -> list[Any]:
            content, attrs = row[2], row[3]
            if content.startswith(FORMULA_START):
                content = "'" + content
            return [row[0].isoformat(), row[1], cells[row[4]], shard, content, attrs]

        return audit

    def flow(row: Record, shard: str) -> list[Any]:
        return [
            row[0].isoformat(),
            cells[row[12]],
            shard,
            *row[1:11],
            row[11].isoformat(),
        ]

    return flow


async def render(
    query: AuditQuery | FlowQuery,
    streams: Sequence[tuple[str, Batches]],
    owners: dict[int, str],
    format: ExportFormat,
) -> AsyncIterator[bytes]:
    """The export's body in chunks of about 256 KiB."""
    descending = query.order == "desc"
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    if format == "csv":
        writer.writerow(csv_header(query))
        row_of = _csv_row(query, owners)
    else:
        item_of = _audit_item(owners) if isinstance(query, AuditQuery) else _flow_item(owners)
    pending: list[bytes] = []
    size = 0
    async for runs in merge_rounds(streams, descending):
        if format == "csv":
            rendered = [(r[0], row_of(r, shard)) for shard, run in runs for r in run]
            writer.writerows(cells for _, cells in _sorted_pairs(rendered, descending))
            if buffer.tell() >= _CHUNK_BYTES:
                yield buffer.getvalue().encode()
                buffer.seek(0)
                buffer.truncate()
            continue
        lines = [(r[0], orjson.dumps(item_of(r, shard))) for shard, run in runs for r in run]
        chunk = b"\n".join(line for _, line in _sorted_pairs(lines, descending)) + b"\n"
        pending.append(chunk)
        size += len(chunk)
        if size >= _CHUNK_BYTES:
            yield b"".join(pending)
            pending, size = [], 0
    if format == "csv":
        yield buffer.getvalue().encode()
    elif pending:
        yield b"".join(pending)


def _sorted_pairs(pairs: list[tuple[datetime, Any]], descending: bool) -> list[Any]:
    pairs.sort(key=_TS, reverse=descending)
    return pairs
