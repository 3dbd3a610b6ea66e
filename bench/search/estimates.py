"""bench/search, the estimate part: count=estimate against count=exact on one day of generated
data with the statistics of real logs (bench/corpus.py): audit rows of 512 characters whose
words come from a Zipf-like vocabulary in topics (words of a topic occur together), and flows
whose ports, protocols and networks go together, loaded as ingest would write them (audit rows
in time order, flows merged batch by batch). For each pattern set or flow filter, over the
whole day and over 12 hours of it: the exact count, the estimate (its method and error), the
planner's estimate of the same condition (what count=estimate answered before), and the time
count=estimate and count=exact add to a page (the median over ``repeats`` of the difference
to the page alone, asked just before)."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
import orjson

from bench.corpus import FlowCorpus, TextCorpus
from bench.harness import auth_for, timed_get
from bench.search.shards import Rows, Shards, map_keys, shard_connections
from router.db.names import day_table
from router.search import sql
from router.search.query import AuditQuery, FlowQuery, IpFilter, Keys, PortFilter, Window
from router.settings import Settings

TEXT_BATCH = 50_000
FLOW_BATCH = 5_000
CORPUS = TextCorpus(seed=5)
TOPIC = CORPUS.topic_word
PATTERN_SETS: dict[str, dict[str, Any]] = {
    "time range alone": {},
    "1 word": {"q": [CORPUS.words[12]]},
    "1 topic word": {"q": [TOPIC(0, 0)]},
    "2 words of a topic": {"q": [TOPIC(0, 0), TOPIC(0, 1)]},
    "3 words of a topic": {"q": [TOPIC(0, 0), TOPIC(0, 1), TOPIC(0, 2)]},
    "3 words, 2 topics": {"q": [CORPUS.words[6], TOPIC(0, 1), TOPIC(0, 3)]},
    "1 word with % and =": {"q": ["cpu=97%"]},
    "2 rarer words of a topic": {"q": [TOPIC(2, 1), TOPIC(2, 3)]},
    "2 regexes of a topic": {"q": [f"{TOPIC(0, 0)} ", f"^.*{TOPIC(0, 2)}"], "match": "regex"},
}
FLOW_FILTERS: dict[str, dict[str, Any]] = {
    "time range alone": {},
    "clients + tcp": {"src_ip": "10.0.0.0/8", "proto": 6},
    "clients + https": {"src_ip": "10.0.0.0/8", "dst_port": "443"},
    "service /22 + ports 1-1024": {"dst_ip": "192.0.0.0/22", "dst_port": "1-1024"},
    "dns: resolvers + 53 + udp": {"dst_ip": "192.0.2.0/24", "dst_port": "53", "proto": 17},
    "server net + tcp 1-8080": {"src_ip": "172.16.0.0/14", "dst_port": "1-8080", "proto": 6},
    "5-tuple": {
        "src_ip": "10.1.0.0/16",
        "dst_ip": "192.0.2.0/24",
        "src_port": "32768-45000",
        "dst_port": "53",
        "proto": 17,
    },
    "either direction": {
        "src_ip": "192.0.0.0/16",
        "dst_port": "32768-60999",
        "proto": 6,
        "either_direction": "true",
    },
}
WINDOWS = {"day": (0, 24), "12 h": (6, 18)}


def _in_order(day: datetime, batch: int, batches: int, size: int, rng: random.Random) -> list[Any]:
    """``size`` sorted times in the ``batch``-th of ``batches`` equal slices of the day."""
    slice_us = 86_400_000_000 // batches
    start = day + timedelta(microseconds=slice_us * batch)
    return sorted(start + timedelta(microseconds=rng.randrange(slice_us)) for _ in range(size))


def text_batches(rows: int, day: datetime) -> Iterator[Rows]:
    rng = random.Random(2)
    batches = -(-rows // TEXT_BATCH)
    for number in range(batches):
        lines = CORPUS.lines(min(TEXT_BATCH, rows - number * TEXT_BATCH), seed=number)
        times = _in_order(day, number, batches, len(lines), rng)
        yield [(ts, line, None) for ts, line in zip(times, lines, strict=True)]


def flow_batches(rows: int, day: datetime) -> Iterator[Rows]:
    """Flows in ddl.FLOW_STAGE_COLUMNS order, a collector's batch covering a slice of the day;
    a batch holds one row per 5-tuple, as ingest stages it."""
    corpus, rng = FlowCorpus(seed=5), random.Random(3)
    batches = -(-rows // FLOW_BATCH)
    for number in range(batches):
        flows = corpus.rows(min(FLOW_BATCH, rows - number * FLOW_BATCH), seed=number)
        merged: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        for flow, ts in zip(flows, _in_order(day, number, batches, len(flows), rng), strict=True):
            src, dst, sport, dport, proto = flow
            if flow in merged:  # the same 5-tuple again: one more record of the flow
                first = merged[flow]
                merged[flow] = (*first[:8], first[8] + 1, first[9], ts)
            else:
                merged[flow] = (src, dst, sport, dport, 4, proto, 1000, 4, 1, ts, ts)
        yield list(merged.values())


@dataclass(frozen=True)
class Loaded:
    key: str
    ident: int
    group: str
    flows: bool


async def load(
    settings: Settings, url: str, day: datetime, text_rows: int, flow_rows: int
) -> list[Loaded]:
    """The audit owner and the switch, each with its day loaded."""
    ((text_id, text_group),) = (await map_keys(url, "audit", ["estimate-text"], day)).values()
    ((flow_id, flow_group),) = (await map_keys(url, "flow", ["estimate-flows"], day)).values()
    text = Loaded("estimate-text", text_id, text_group, flows=False)
    flows = Loaded("estimate-flows", flow_id, flow_group, flows=True)
    async with shard_connections(settings) as shards:
        started = time.perf_counter()
        table = day_table("audit", text.ident, day)
        await shards.copy(table, shards.of(text.group), text_batches(text_rows, day))
        print(f"  {text_rows:,} audit rows in {time.perf_counter() - started:.0f}s", flush=True)
        started = time.perf_counter()
        table = day_table("flow", flows.ident, day)
        await shards.merge_flows(table, shards.of(flows.group), flow_batches(flow_rows, day))
        print(f"  {flow_rows:,} flows in {time.perf_counter() - started:.0f}s", flush=True)
        await shards.settle()
    return [text, flows]


def as_query(loaded: Loaded, window: Window, params: dict[str, Any]) -> AuditQuery | FlowQuery:
    if not loaded.flows:
        match = params.get("match", "substring")
        patterns = tuple(params.get("q", ()))
        return AuditQuery(Keys.of([loaded.key]), window, patterns, match, "asc")

    def ip(name: str) -> IpFilter | None:
        return IpFilter.parse(params[name], name) if name in params else None

    def port(name: str) -> PortFilter | None:
        return PortFilter.parse(params[name], name) if name in params else None

    return FlowQuery(
        Keys.of([loaded.key]),
        window,
        ip("src_ip"),
        ip("dst_ip"),
        port("src_port"),
        port("dst_port"),
        None,
        params.get("proto"),
        params.get("either_direction") == "true",
        "asc",
    )


async def planner_rows(
    shards: Shards, loaded: Loaded, query: AuditQuery | FlowQuery, day: datetime
) -> int:
    """What count=estimate answered before it sampled: the planner's row estimate, summed."""
    table = day_table("flow" if loaded.flows else "audit", loaded.ident, day)
    text, arguments = sql.estimate_sql(query, [table])
    total = 0
    for shard in shards.of(loaded.group):
        plan = await shards.connections[shard].fetchval(text, *arguments)
        total += int(orjson.loads(plan)[0]["Plan"]["Plan Rows"])
    return total


def _error_pct(value: float, exact: int) -> float:
    return round(100 * (value - exact) / max(exact, 1), 2)


async def count_times(
    http: httpx.AsyncClient, asked: dict[str, Any], repeats: int, path: str
) -> tuple[dict[str, float], dict[str, Any]]:
    """The milliseconds count=estimate and count=exact add to the page ``asked`` (and the page
    alone, "none"), and the count objects of each mode."""
    times: dict[str, list[float]] = {"none": [], "estimate": [], "exact": []}
    counts: dict[str, Any] = {}
    for _ in range(repeats):
        for mode, spent in times.items():
            ms, body = await timed_get(http, {**asked, "count": mode}, path)
            if body["partial"]:
                raise RuntimeError(f"a partial answer: {body['failed_shards']}")
            spent.append(ms)
            counts[mode] = body["count"]
    # What a count adds to the page requested just before it, the median over the repeats:
    # the machine is shared, and pairs taken moments apart cancel most of the interference.
    added = {
        mode: round(
            max(statistics.median(m - n for m, n in zip(spent, times["none"], strict=True)), 0.01),
            2,
        )
        for mode, spent in times.items()
    }
    return added, counts


async def measure_one(
    http: httpx.AsyncClient,
    shards: Shards,
    target: Loaded,
    window: Window,
    params: dict[str, Any],
    repeats: int,
) -> dict[str, Any]:
    """One set over one window: counts, errors and the time each count mode adds to a page."""
    path = "/v1/flows/search" if target.flows else "/v1/audit/search"
    asked: dict[str, Any] = {"switch" if target.flows else "owner": target.key, "limit": 1}
    asked |= {"from": window.start.isoformat(), "to": window.end.isoformat(), **params}
    added, counts = await count_times(http, asked, repeats, path)
    exact, estimate = counts["exact"]["value"], counts["estimate"]
    planner = await planner_rows(shards, target, as_query(target, window, params), window.start)
    return {
        "exact": exact,
        "estimate": estimate["value"],
        "method": estimate["method"],
        "error_pct": _error_pct(estimate["value"], exact),
        "planner_error_pct": _error_pct(planner, exact),
        "estimate_ms": added["estimate"],
        "exact_ms": added["exact"],
        "time_share": round(added["estimate"] / added["exact"], 4),
    }


async def measure(
    settings: Settings, url: str, day: datetime, loaded: list[Loaded], repeats: int
) -> list[dict[str, Any]]:
    rows = []
    async with (
        shard_connections(settings) as shards,
        httpx.AsyncClient(base_url=url, timeout=600, headers=auth_for(url)) as http,
    ):
        for target in loaded:
            sets = FLOW_FILTERS if target.flows else PATTERN_SETS
            for window_name, (first, last) in WINDOWS.items():
                window = Window(day + timedelta(hours=first), day + timedelta(hours=last))
                for name, params in sets.items():
                    row = {"kind": "flows" if target.flows else "audit", "set": name}
                    row |= {"window": window_name}
                    row |= await measure_one(http, shards, target, window, params, repeats)
                    rows.append(row)
                    print(
                        f"  {row['kind']:5} {name:28} {window_name:4} exact {row['exact']:>9,} "
                        f"estimate {row['error_pct']:+6.2f}% ({row['method']}) planner "
                        f"{row['planner_error_pct']:+7.1f}%  {row['estimate_ms']:7.1f} ms vs "
                        f"{row['exact_ms']:8.1f} ms",
                        flush=True,
                    )
    return rows
