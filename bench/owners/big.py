"""bench/owners/big (issue 38): big owners with the shared tables of small owners on and off,
side by side in one run against the same commit. Two routers on one cluster, one with
SHARDLOG_SHARED__ENABLED=true and one with false, each with owners of its own; in turns, a
round of each layout, every round on a day of its own (yesterday, the day before, ...), so each
measures whole owner-days from their first row:

- ingest: CLIENTS clients posting NDJSON requests of --rows-per-request rows, each of one
  owner, --rows-per-owner-day rows of each of --owners owners (a big owner: 200,000 rows a day,
  100,000 on each of the two shards of its spread), rows/s. In the shared layout each router
  sends an owner-day's first SHARDLOG_SHARED__OWN_TABLE_ROWS (10,000) rows of each shard to
  that shard's shared table and the rest to the owner-day's own table (what a big owner pays
  for the shared layout: its first share of every day; the promotion job moves it later);
- search: one-owner 1-hour first pages (limit 100) of random owners and hours of the round's
  day, one at a time, p50 and p95 (the shared layout reads the own table and the shared rows);
- context, not a target: "medium" owner-days of OWN_TABLE_ROWS rows (spread over two shards,
  all shared) posted the same way: the rate a whole shared owner-day is written at.

A warm-up round of each layout first (--warm-up-rounds), written and searched, not counted.

Medians of the repeats; each layout's rows counted at the end against what was written (an
oracle of the writer's), and the shared layout's rows found in shared tables counted on the
shards. Targets (the issue: "big owners: ingest and search figures unchanged ... within
noise"): the shared layout's ingest rate >= 0.95x the per-owner layout's and its search p50 <=
1.10x, with each layout's spread over the repeats beside them. Writes
bench/results/owners-big.{json,png}.

    python -m bench.owners.big [--owners 4] [--rows-per-owner-day 200000]
        [--rows-per-request 2000] [--searches 200] [--repeats 5] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import httpx
import orjson

from bench import harness
from bench.harness import (
    bench_cluster,
    bench_settings,
    print_verdicts,
    scratch_dir,
    verdict,
    write_results,
)
from bench.owners.layout_run import LAYOUTS, quantiles
from bench.shard_view import catalog_shards, owner_id, shard_sql
from bench.stamps import mode_of
from router import clock
from router.db.names import shared_table
from router.settings import Settings
from services.router_process import RouterProcess

CLIENTS = 4
TARGETS = {"ingest_ratio": 0.95, "search_p50_ratio": 1.10}


def owner_key(layout: str, index: int, size: str = "big") -> str:
    return f"{size}-{layout}-{index}"


def bodies(
    layout: str, owners: int, rows_per_owner_day: int, per_request: int, day: date, tag: str
) -> list[bytes]:
    """A round's requests (``tag``: the owners' size, big or medium): each of ``per_request``
    rows of one owner (the owners in turn), every owner's rows evenly spread over the day, in
    order."""
    start = datetime.combine(day, datetime.min.time(), UTC)
    each = max(1, rows_per_owner_day // per_request)  # requests per owner
    step = timedelta(seconds=86_000 / (each * per_request))
    made = []
    for request in range(owners * each):
        owner, nth = owner_key(layout, request % owners, tag), request // owners
        made.append(
            b"".join(
                orjson.dumps(
                    {
                        "owner": owner,
                        "ts": (start + (nth * per_request + n) * step).isoformat(),
                        "content": f"{owner} request {nth} row {n}",
                    }
                )
                + b"\n"
                for n in range(per_request)
            )
        )
    return made


def ingest(url: str, made: list[bytes]) -> float:
    """Rows/s of posting ``made`` from CLIENTS clients."""
    rows = sum(body.count(b"\n") for body in made)
    started = time.perf_counter()
    asyncio.run(harness.send(url, "/v1/audit", made, CLIENTS))
    return rows / (time.perf_counter() - started)


async def searches(url: str, layout: str, args: argparse.Namespace, day: date) -> list[float]:
    """Milliseconds of one-owner 1-hour first pages; each must find rows (every hour of the
    day holds some of every owner's)."""
    rng = random.Random(args.seed)
    start = datetime.combine(day, datetime.min.time(), UTC)
    latencies = []
    async with httpx.AsyncClient(base_url=url, timeout=60, headers=harness.auth_for(url)) as http:
        for _ in range(args.searches):
            hour = start + timedelta(hours=rng.randrange(23))
            params = {
                "owner": owner_key(layout, rng.randrange(args.owners)),
                "from": hour.isoformat(),
                "to": (hour + timedelta(hours=1)).isoformat(),
                "limit": 100,
            }
            elapsed, page = await harness.timed_get(http, params)
            if not page["items"]:
                raise RuntimeError(f"search {params}: no rows")
            latencies.append(elapsed)
    return latencies


def counted(url: str, keys: list[str], day: date) -> int:
    start = datetime.combine(day, datetime.min.time(), UTC)
    params: dict[str, Any] = {
        "owner": keys,
        "from": start.isoformat(),
        "to": (start + timedelta(days=1)).isoformat(),
        "limit": 1,
        "count": "exact",
    }
    answer = httpx.get(
        f"{url}/v1/audit/search", params=params, headers=harness.auth_for(url), timeout=300
    )
    if answer.status_code != 200:
        raise RuntimeError(f"count: {answer.status_code} {answer.text[:300]}")
    return int(answer.json()["count"]["value"])


def shared_rows(url: str, keys: list[str], days: list[date]) -> int:
    """The owners' rows of ``days`` in the shards' shared tables, counted on the shards."""
    with httpx.Client(base_url=url, headers=harness.auth_for(url), timeout=60) as api:
        ids = [owner_id(api, "audit", key) for key in keys]
        shards = catalog_shards(api)
    listed = ",".join(str(i) for i in ids if i is not None) or "0"
    total = 0
    for dsn in shards.values():
        for day in days:
            table = shared_table("audit", day)
            if shard_sql(dsn, f"SELECT to_regclass('{table}') IS NOT NULL").strip() != "t":
                continue
            found = shard_sql(dsn, f"SELECT count(*) FROM {table} WHERE owner_id IN ({listed})")
            total += int(found.strip())
    return total


def router_for(settings: Settings, layout: str, port: int) -> RouterProcess:
    env = {
        **harness.router_env(settings),
        "SHARDLOG_SERVER__PORT": str(port),
        "SHARDLOG_SHARED__ENABLED": LAYOUTS[layout],
        "SHARDLOG_RETENTION__ENABLED": "false",
    }
    # A home of its own per layout: the two run at once on the one cluster.
    home = settings.cluster.data_dir / f"router-{layout}"
    return RouterProcess(home, settings.server.host, port, env=env)


def spread(values: list[float]) -> float:
    """(max - min) / median of the repeats: how far they scatter."""
    middle = statistics.median(values)
    return round((max(values) - min(values)) / middle, 3) if middle else 0.0


def measure(settings: Settings, args: argparse.Namespace) -> dict[str, Any]:
    yesterday = clock.today() - timedelta(days=1)
    rounds = args.warm_up_rounds + args.repeats
    big_days = [yesterday - timedelta(days=r) for r in range(rounds)]
    medium_days = [yesterday - timedelta(days=rounds + r) for r in range(args.repeats)]
    ports = (settings.server.port, args.second_router_port or settings.server.port + 1)
    routers = {
        layout: router_for(settings, layout, port)
        for layout, port in zip(LAYOUTS, ports, strict=True)
    }
    try:
        for router in routers.values():
            router.start()
            harness.TOKENS[router.url] = harness.bench_token(settings)
        rates: dict[str, list[float]] = {layout: [] for layout in LAYOUTS}
        medium: dict[str, list[float]] = {layout: [] for layout in LAYOUTS}
        p50s: dict[str, list[float]] = {layout: [] for layout in LAYOUTS}
        latencies: dict[str, list[float]] = {layout: [] for layout in LAYOUTS}
        for round_index, day in enumerate(big_days):
            repeat = round_index - args.warm_up_rounds
            # In turns, the first layout alternating: neither always meets a warmer cache.
            order = list(LAYOUTS) if round_index % 2 == 0 else list(reversed(LAYOUTS))
            for layout in order:
                url = routers[layout].url
                made = bodies(
                    layout, args.owners, args.rows_per_owner_day, args.rows_per_request, day, "big"
                )
                rate = ingest(url, made)
                found = asyncio.run(searches(url, layout, args, day))
                if repeat < 0:
                    continue  # a warm-up round: written and searched, not counted
                rates[layout].append(rate)
                p50s[layout].append(statistics.median(found))
                latencies[layout] += found
            if repeat < 0:
                print(f"  warm-up round {round_index + 1}", flush=True)
                continue
            print(
                f"  repeat {repeat + 1}/{args.repeats}: "
                + ", ".join(
                    f"{layout} {rates[layout][-1]:,.0f} rows/s, p50 {p50s[layout][-1]:.2f} ms"
                    for layout in LAYOUTS
                ),
                flush=True,
            )
        for round_index, day in enumerate(medium_days):
            order = list(LAYOUTS) if round_index % 2 == 0 else list(reversed(LAYOUTS))
            for layout in order:
                made = bodies(
                    layout, args.owners, args.medium_rows, args.rows_per_request, day, "medium"
                )
                medium[layout].append(ingest(routers[layout].url, made))
        print(
            "  medium owner-days (context): "
            + ", ".join(f"{x} {statistics.median(medium[x]):,.0f} rows/s" for x in LAYOUTS),
            flush=True,
        )
        layouts = {}
        for layout, router in routers.items():
            written: dict[str, int] = {}
            found_rows: dict[str, int] = {}
            for size, days, per_owner_day in (
                ("big", big_days, args.rows_per_owner_day),
                ("medium", medium_days, args.medium_rows),
            ):
                keys = [owner_key(layout, n, size) for n in range(args.owners)]
                each = max(1, per_owner_day // args.rows_per_request) * args.rows_per_request
                written[size] = len(days) * args.owners * each
                found_rows[size] = sum(counted(router.url, keys, day) for day in days)
                if found_rows[size] != written[size]:
                    raise RuntimeError(
                        f"{layout} {size}: {found_rows[size]} rows counted, {written[size]} written"
                    )
            big_keys = [owner_key(layout, n) for n in range(args.owners)]
            layouts[layout] = {
                "rows_written": written["big"],
                "rows_shared": shared_rows(router.url, big_keys, big_days),
                "ingest_rows_per_s": [round(r, 1) for r in rates[layout]],
                "ingest_rows_per_s_median": round(statistics.median(rates[layout]), 1),
                "ingest_spread": spread(rates[layout]),
                "search_p50_ms_per_repeat": [round(p, 3) for p in p50s[layout]],
                "search_p50_ms_median": round(statistics.median(p50s[layout]), 3),
                "search_spread": spread(p50s[layout]),
                "search_all": quantiles(latencies[layout]),
                "medium_rows_written": written["medium"],
                "medium_ingest_rows_per_s": [round(r, 1) for r in medium[layout]],
                "medium_ingest_rows_per_s_median": round(statistics.median(medium[layout]), 1),
            }
        return layouts
    finally:
        for router in routers.values():
            router.stop()


def judged(layouts: dict[str, Any]) -> dict[str, Any]:
    shared, own = layouts["shared"], layouts["per-owner"]
    ingest_ratio = shared["ingest_rows_per_s_median"] / own["ingest_rows_per_s_median"]
    search_ratio = shared["search_p50_ms_median"] / own["search_p50_ms_median"]
    return {
        "ingest_ratio": verdict(round(ingest_ratio, 3), TARGETS["ingest_ratio"], at_most=False),
        "search_p50_ratio": verdict(round(search_ratio, 3), TARGETS["search_p50_ratio"]),
    }


def plot(layouts: dict[str, Any]) -> Callable[[Any], None]:
    def draw(figure: Any) -> None:
        for index, (title, field) in enumerate(
            (
                ("ingest rows/s per repeat", "ingest_rows_per_s"),
                ("one-owner 1-hour search p50 ms per repeat", "search_p50_ms_per_repeat"),
            ),
            start=1,
        ):
            axes = figure.add_subplot(1, 2, index)
            for layout, found in layouts.items():
                axes.plot(range(1, len(found[field]) + 1), found[field], marker="o", label=layout)
            axes.set_title(title, fontsize=9)
            axes.set_xlabel("repeat", fontsize=8)
            axes.legend(fontsize=8)
        figure.suptitle("big owners: shared tables of small owners on vs off, same commit")

    return draw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.owners.big")
    parser.add_argument("--owners", type=int, default=4)
    parser.add_argument("--rows-per-owner-day", type=int, default=200_000)
    parser.add_argument("--rows-per-request", type=int, default=2000)
    parser.add_argument(
        "--medium-rows",
        type=int,
        default=10_000,
        help="rows of each medium owner-day (context: all shared at the default threshold)",
    )
    parser.add_argument("--searches", type=int, default=200, help="per repeat and layout")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--warm-up-rounds", type=int, default=1, help="rounds of both layouts not counted"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="3 repeats, 100 searches each")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--base-port", type=int, default=harness.BENCH_BASE_PORT)
    parser.add_argument("--router-port", type=int, default=harness.BENCH_ROUTER_PORT)
    parser.add_argument(
        "--second-router-port", type=int, default=None, help="default: --router-port + 1"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.searches = 3, 100
    settings = bench_settings(
        args.data_dir or scratch_dir("shardlog-bench-owners-big-"),
        shards=args.shards,
        groups=args.groups,
        base_port=args.base_port,
        router_port=args.router_port,
    )
    with bench_cluster(settings, with_router=False):
        layouts = measure(settings, args)
    targets = judged(layouts)
    payload = {
        "layouts": layouts,
        "targets": targets,
        "context": {
            "spreads": harness.context(
                max(
                    found[f]
                    for found in layouts.values()
                    for f in ("ingest_spread", "search_spread")
                ),
                "the largest (max - min) / median over the repeats of either layout: the noise "
                "the ratios are read against",
            ),
            "shared_fraction": harness.context(
                round(layouts["shared"]["rows_shared"] / layouts["shared"]["rows_written"], 4),
                "of the big owners' rows, those the shared layout left in shared tables (each "
                "shard's first SHARDLOG_SHARED__OWN_TABLE_ROWS of an owner-day, until the "
                "promotion job moves them)",
            ),
            "medium_ingest_ratio": harness.context(
                round(
                    layouts["shared"]["medium_ingest_rows_per_s_median"]
                    / layouts["per-owner"]["medium_ingest_rows_per_s_median"],
                    3,
                ),
                "owner-days of --medium-rows rows, all shared in the shared layout: the rate "
                "a whole shared owner-day is written at, over the per-owner layout's",
            ),
        },
    }
    json_path, png = write_results("owners-big", payload, plot(layouts), mode=mode_of(parser, args))
    print_verdicts(targets)
    print(f"wrote {json_path} and {png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
