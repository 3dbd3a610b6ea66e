"""The searches of bench/storage, asked of every store holding the same rows, with their
answers compared: a first page (up to 100 rows, ascending) as (ts, content), and an exact count.

- shardlog, heap: router/search/sql.py's own page_sql and count_sql for the owners' day
  tables of one shard (the statement shapes the router sends);
- shardlog, zstd segments: the design's page statement (docs/architecture.md "Compacted
  days"): per owner-day the segments pruned by their ts bounds and ``shardlog_may_contain``
  for each pattern, unpacked LATERAL (only the rows in the window built: extension 1.1's
  bounded unpack, as router/compaction/layout.py passes it), filtered by the page's
  condition, ``ORDER BY seq, ord`` under the page's LIMIT; the owners' branches merged in
  (ts, owner id, id) order. The branch of late heap rows is left out: after the clear a
  compacted day's heap is empty;
- VictoriaLogs: LogsQL over /select/logsql/query: the window as a ``_time`` filter, each
  pattern as a substring filter of ``_msg``, ``sort by (_time) | limit``, or ``stats count()``.

Each is timed warm: medians of ``repeats`` rounds after one unmeasured, every store asked in
turn in each round."""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from bench.storage.victorialogs import VictoriaLogs, logsql_time, substring
from router.db.names import DayTable
from router.search import sql
from router.search.query import AuditQuery, Keys, Window

PAGE_ROWS = 100
Answer = tuple[list[tuple[datetime, str]], int | None]


@dataclass(frozen=True)
class Search:
    """One search of a data set: every pattern must match, within [start, end)."""

    name: str
    patterns: tuple[str, ...]
    window: Window
    count: bool  # an exact count rather than a first page

    @property
    def start(self) -> datetime:
        return self.window.start

    @property
    def end(self) -> datetime:
        return self.window.end

    def query(self) -> AuditQuery:
        return AuditQuery(Keys.of(), self.window, self.patterns, "substring", "asc")

    def describe(self) -> dict[str, Any]:
        return {
            "patterns": list(self.patterns),
            "from": self.start.isoformat(),
            "to": self.end.isoformat(),
            "answer": "exact count" if self.count else f"first page of {PAGE_ROWS} rows",
        }


def heap_statement(search: Search, tables: list[DayTable]) -> tuple[str, list[Any]]:
    if search.count:
        return sql.count_sql(search.query(), tables)
    return sql.page_sql(search.query(), tables, "s0", None, False, PAGE_ROWS)


def segments_statement(
    search: Search, segments: str, owner_ids: list[int]
) -> tuple[str, list[Any]]:
    params: list[Any] = [search.start, search.end, *search.patterns]
    patterns = [f"${3 + i}" for i in range(len(search.patterns))]
    pruned = "".join(f" AND shardlog_may_contain(s.grams, {p})" for p in patterns)
    matched = "".join(f" AND strpos(u.content, {p}) > 0" for p in patterns)
    source = (
        f"FROM {segments} s CROSS JOIN LATERAL shardlog_unpack_audit(s.block, $1, $2) u "
        "WHERE s.owner_id = {owner} AND s.last_ts >= $1 AND s.first_ts < $2"
        f"{pruned} AND u.ts >= $1 AND u.ts < $2{matched}"
    )
    if search.count:
        branches = [f"SELECT count(*) AS n {source.format(owner=owner)}" for owner in owner_ids]
        return f"SELECT sum(n)::bigint FROM ({' UNION ALL '.join(branches)}) AS counts", params
    branches = [
        f"(SELECT u.ts, u.id, u.content, u.attrs, {owner}::bigint AS owner_id "
        f"{source.format(owner=owner)} ORDER BY s.seq, u.ord LIMIT {PAGE_ROWS})"
        for owner in owner_ids
    ]
    return (
        f"SELECT * FROM ({' UNION ALL '.join(branches)}) AS page "
        f"ORDER BY ts, owner_id, id LIMIT {PAGE_ROWS}"
    ), params


def logsql(search: Search) -> str:
    filters = " ".join([logsql_time(search.start, search.end), *map(substring, search.patterns)])
    if search.count:
        return f"{filters} | stats count() as n"
    return f"{filters} | sort by (_time) | limit {PAGE_ROWS} | fields _time, _msg"


async def ask_sql(
    connection: asyncpg.Connection, statement: tuple[str, list[Any]], count: bool
) -> Answer:
    text, params = statement
    if count:
        return [], int(await connection.fetchval(text, *params) or 0)
    rows = await connection.fetch(text, *params)
    return [(r["ts"], r["content"]) for r in rows], None


def ask_victorialogs(peer: VictoriaLogs, search: Search) -> Answer:
    found = peer.query(logsql(search))
    if search.count:
        return [], int(found[0]["n"]) if found else 0
    return [(datetime.fromisoformat(r["_time"]), r["_msg"]) for r in found], None


async def medians_ms(
    stores: dict[str, Callable[[], Awaitable[Answer]]], repeats: int
) -> tuple[dict[str, float], dict[str, Answer]]:
    """Each store's median time and its answer: one unmeasured ask of each, then ``repeats``
    rounds asking every store in turn, so that the machine's drift falls on all alike."""
    answers = {name: await ask() for name, ask in stores.items()}  # warm
    samples: dict[str, list[float]] = {name: [] for name in stores}
    for _ in range(repeats):
        for name, ask in stores.items():
            started = time.perf_counter()
            answers[name] = await ask()
            samples[name].append((time.perf_counter() - started) * 1000)
    return {name: round(statistics.median(taken), 3) for name, taken in samples.items()}, answers


def compare(answers: dict[str, Answer]) -> dict[str, Any]:
    """Whether every store gave the first store's answer; where not, what differs."""
    (first, reference), *others = answers.items()
    differences = []
    for name, answer in others:
        if answer[1] != reference[1]:
            differences.append(f"{name} counted {answer[1]}, {first} {reference[1]}")
        if answer[0] != reference[0]:
            ours, theirs = set(reference[0]), set(answer[0])
            differences.append(
                f"{name}: {len(answer[0])} rows vs {first}'s {len(reference[0])}, "
                f"{len(theirs - ours)} not in {first}'s, {len(ours - theirs)} missing"
                + ("" if ours != theirs else ", same rows in another order")
            )
    shown = reference[1] if reference[1] is not None else len(reference[0])
    return {"equal": not differences, "answer": shown, "differences": differences}


async def run(
    search: Search,
    stores: dict[str, Callable[[], Awaitable[Answer]]],
    repeats: int,
) -> dict[str, Any]:
    timings, answers = await medians_ms(stores, repeats)
    return {**search.describe(), "median_ms": timings, **compare(answers)}


def victorialogs_asker(peer: VictoriaLogs, search: Search) -> Callable[[], Awaitable[Answer]]:
    async def ask() -> Answer:
        return ask_victorialogs(peer, search)

    return ask


def sql_asker(
    connection: asyncpg.Connection, statement: tuple[str, list[Any]], count: bool
) -> Callable[[], Awaitable[Answer]]:
    async def ask() -> Answer:
        return await ask_sql(connection, statement, count)

    return ask
