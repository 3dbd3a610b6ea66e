"""bench/search/mixed: do reads starve writes? Writes through the router alone and beside
clients paging large searches, side by side in one run (bench/grid's mixed run, with pages of
1,000-10,000 rows instead of first pages of 100):

- 1,000-row audit requests from ``--clients`` clients: first as fast as they go (the best
  rate), then paced at half that rate, alone and beside 2 clients paging searches, alternated
  ``--repeats`` times. Target: the paced writes keep >= 0.8x their solo rate (median of the
  repeats' ratios).
- 10-row audit requests from one client as fast as it goes, alone and beside one client paging
  searches, alternated. Target: the request's p50 latency beside the searches <= 2x its solo
  p50 (median of the repeats' ratios).

The paging clients read and parse their pages in processes of their own (a page of 10,000
rows takes tens of milliseconds of a Python client's CPU, which in the writers' process would
delay the writes' own client). Every search must answer 200 (a failing one ends the run). The
search owners hold ``--preload`` rows each in the last hour, so that pages of 10,000 rows are
full. Writes bench/results/search_mixed.{json,png}.

    python -m bench.search.mixed [--seconds 10] [--repeats 3] [--clients 4]
    python -m bench.search.mixed --quick     # 3 s phases, 2 repeats, 20,000 preloaded rows
    python -m bench.search.mixed --workers 2     # SHARDLOG_SERVER__WORKERS of the router

Ports default to SHARDLOG_BENCH_BASE_PORT / SHARDLOG_BENCH_ROUTER_PORT (26432, 8090).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import httpx

from bench import cluster_run, traffic
from bench.grid.__main__ import mixed
from bench.harness import bench_settings, verdict, write_results
from bench.stamps import mode_of

NAME = "search_mixed"
# Rows per page of the paging clients, in turn.
PAGE_LIMITS = (1_000, 2_000, 5_000, 10_000)
# Pages read of one search before a client starts another.
PAGES_PER_SEARCH = 3
KEPT_SHARE = 0.8
LATENCY_RATIO = 2.0


_CLIENT: list[httpx.Client] = []


def fetch_page(base_url: str, headers: dict[str, str], params: dict[str, Any]) -> str | None:
    """One page, read and parsed in a process of its own (as a search client of its own would
    be): its next cursor. Parsing a 10,000-row page takes tens of milliseconds of CPU, which in
    the writers' process would delay their requests, not the router's answers."""
    if not _CLIENT:
        _CLIENT.append(httpx.Client(base_url=base_url, headers=headers, timeout=300))
    response = _CLIENT[0].get("/v1/audit/search", params=params)
    if response.status_code != 200:
        raise RuntimeError(f"search: {response.status_code} {response.text[:300]}")
    cursor: str | None = response.json()["next_cursor"]
    return cursor


def pager(owners: list[str], processes: ProcessPoolExecutor) -> traffic.Request:
    """Request ``n`` reads one page of ``owners``' last hour in one of ``processes``: the next
    page of a search begun before (up to PAGES_PER_SEARCH pages of it), or the first page of a
    new one, of PAGE_LIMITS[n % 4] rows."""
    begun: list[tuple[dict[str, Any], str, int]] = []

    async def page(http: httpx.AsyncClient, n: int) -> None:
        if begun:
            params, cursor, read = begun.pop()
            sent = {**params, "cursor": cursor}
        else:
            params = {
                "owner": owners[n % len(owners)],
                "limit": PAGE_LIMITS[n % len(PAGE_LIMITS)],
                **traffic.recent_window(),
            }
            sent, read = params, 0
        following = await asyncio.get_running_loop().run_in_executor(
            processes, fetch_page, str(http.base_url), dict(http.headers), sent
        )
        if following and read + 1 < PAGES_PER_SEARCH:
            begun.append((params, following, read + 1))

    return page


async def measure(http: httpx.AsyncClient, args: argparse.Namespace) -> dict[str, Any]:
    writers = [f"mixed-w{n}" for n in range(4)]
    readers = [f"mixed-r{n}" for n in range(2)]
    # Day tables exist before the first phase; the search owners hold full pages.
    await traffic.send_count(http, traffic.writer(writers, 1), len(writers), 1, "day tables")
    requests = len(readers) * args.preload // 1_000
    await traffic.send_count(http, traffic.writer(readers, 1_000), requests, 2, "preload")
    seconds = args.seconds
    flat_out = {"clients": args.clients, "rows_per_request": 1_000, "tps": 2.0 * 10**9}
    solo_best = await mixed(http, flat_out, writers, seconds, search_clients=0, paced=False)
    best = {**flat_out, "tps": solo_best["rows_per_s"] / 1_000}
    print(f"  best: {solo_best['rows_per_s']:,} rows/s in 1,000-row requests", flush=True)
    small = {"clients": 1, "rows_per_request": 10, "tps": 1.0}
    rounds = []
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as processes:
        for repeat in range(args.repeats):
            paced_solo = await mixed(http, best, writers, seconds, search_clients=0)
            paced_mixed = await mixed(
                http, best, writers, seconds, search=pager(readers, processes)
            )
            small_solo = await mixed(http, small, writers, seconds, search_clients=0, paced=False)
            small_mixed = await mixed(
                http,
                small,
                writers,
                seconds,
                search=pager(readers, processes),
                search_clients=1,
                paced=False,
            )
            rounds.append(one_round(paced_solo, paced_mixed, small_solo, small_mixed))
            print(f"  round {repeat + 1}: {said(rounds[-1])}", flush=True)
    kept = statistics.median(r["kept"] for r in rounds)
    ratio = statistics.median(r["small_p50_ratio"] for r in rounds)
    targets = {
        "paced_writes_kept_beside_2_pagers": verdict(round(kept, 3), KEPT_SHARE, at_most=False),
        "small_write_p50_beside_1_pager_vs_solo": verdict(round(ratio, 3), LATENCY_RATIO),
    }
    for name, target in targets.items():
        if not target["met"]:
            print(
                f"  SHORTFALL: {name} {target['value']} misses its target {target['target']}",
                flush=True,
            )
    return {
        "params": {
            "seconds": seconds,
            "repeats": args.repeats,
            "clients": args.clients,
            "preload_rows_per_search_owner": args.preload,
            "page_limits": list(PAGE_LIMITS),
            "pages_per_search": PAGES_PER_SEARCH,
            "router_workers": args.workers,
        },
        "best": solo_best,
        "rounds": rounds,
        "kept_median": round(kept, 3),
        "small_p50_ratio_median": round(ratio, 3),
        "targets": targets,
    }


def one_round(
    paced_solo: dict[str, Any],
    paced_mixed: dict[str, Any],
    small_solo: dict[str, Any],
    small_mixed: dict[str, Any],
) -> dict[str, Any]:
    p50 = small_solo["write_latency"]["p50_ms"], small_mixed["write_latency"]["p50_ms"]
    return {
        "paced_solo": paced_solo,
        "paced_mixed": paced_mixed,
        "small_solo": small_solo,
        "small_mixed": small_mixed,
        "kept": round(paced_mixed["rows_per_s"] / max(paced_solo["rows_per_s"], 1), 3),
        "small_p50_ratio": round(p50[1] / p50[0], 3),
    }


def said(one: dict[str, Any]) -> str:
    return (
        f"paced writes {one['paced_solo']['rows_per_s']:,} rows/s alone, "
        f"{one['paced_mixed']['rows_per_s']:,} beside 2 pagers ({one['kept']}x; pages "
        f"{one['paced_mixed']['search_latency']}); 10-row p50 "
        f"{one['small_solo']['write_latency']['p50_ms']} ms alone, "
        f"{one['small_mixed']['write_latency']['p50_ms']} ms beside 1 pager "
        f"({one['small_p50_ratio']}x; pages {one['small_mixed']['search_latency']})"
    )


def plot(payload: dict[str, Any]) -> Any:
    def draw(figure: Any) -> None:
        rounds = payload["rounds"]
        numbers = list(range(1, len(rounds) + 1))
        rates = figure.add_subplot(1, 2, 1)
        for key, label in (("paced_solo", "alone"), ("paced_mixed", "beside 2 pagers")):
            rates.plot(numbers, [r[key]["rows_per_s"] for r in rounds], marker="o", label=label)
        rates.set_xlabel("round")
        rates.set_ylabel("rows/s")
        rates.set_ylim(bottom=0)
        rates.set_title("1,000-row writes paced at half the best rate", fontsize=9)
        rates.legend(fontsize=8)
        latency = figure.add_subplot(1, 2, 2)
        for key, label in (("small_solo", "alone"), ("small_mixed", "beside 1 pager")):
            values = [r[key]["write_latency"]["p50_ms"] for r in rounds]
            latency.plot(numbers, values, marker="o", label=label)
        latency.set_xlabel("round")
        latency.set_ylabel("p50 ms")
        latency.set_ylim(bottom=0)
        latency.set_title("10-row writes, one client", fontsize=9)
        latency.legend(fontsize=8)

    return draw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.search.mixed")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per phase")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--clients", type=int, default=4, help="clients of 1,000-row writes")
    parser.add_argument("--preload", type=int, default=40_000, help="rows per search owner")
    parser.add_argument("--workers", type=int, default=1, help="router processes")
    parser.add_argument("--shards", type=int, default=12)
    parser.add_argument("--quick", action="store_true")
    cluster_run.add_cluster_flags(parser, "var/bench-search-mixed")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.repeats, args.preload = 3.0, 2, 20_000
    settings = bench_settings(
        args.data_dir, shards=args.shards, base_port=args.base_port, router_port=args.router_port
    )
    payload = cluster_run.run(
        settings,
        args.keep,
        lambda http, _cluster: measure(http, args),
        router_env={"SHARDLOG_SERVER__WORKERS": str(args.workers)},
    )
    json_path, png_path = write_results(NAME, payload, plot(payload), mode=mode_of(parser, args))
    print(f"  wrote {json_path} and {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
