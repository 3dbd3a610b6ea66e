"""bench/grid: pgbench-tools' grid for the write path. Audit writes through the router from
1, 2, 4, 8 clients x 1, 10, 1,000 rows per request, each cell 3 runs x N seconds: tps, rows/s,
average, p90 and max latency of a request per cell. Then BRIN against btree as the time index
of one day table of >= 1M rows on one shard (write rate, index size), and a mixed run: writes
paced at half the best cell's rate (its clients and request size) beside 2 clients searching
without pause, reporting the write rate kept and the searches' latency. Writes
bench/results/grid.{json,png}: rows/s and latency by clients, one line per request size.

    python -m bench.grid [--seconds 10] [--runs 3] [--clients 1,2,4,8] [--rows 1,10,1000]
    python -m bench.grid --quick     # 1 and 4 clients x 1 and 1,000 rows, 1 run x 3 s

Ports default to SHARDLOG_BENCH_BASE_PORT / SHARDLOG_BENCH_ROUTER_PORT (26432, 8090).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

import httpx

from bench import cluster_run, traffic
from bench.grid import cells, time_index
from bench.harness import Progress, bench_settings, verdict, write_results
from bench.stamps import mode_of
from services.postgres import PostgresInstance

NAME = "grid"
SEARCH_CLIENTS = 2
# Targets: the mixed run keeps at least this share of its paced write rate, and its searches'
# p90 stays under this many milliseconds.
KEPT_SHARE = 0.9
SEARCH_P90_MS = 250.0


def numbers(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


async def mixed(
    http: httpx.AsyncClient,
    best: dict[str, Any],
    owners: list[str],
    seconds: float,
    *,
    search: traffic.Request | None = None,
    search_clients: int = SEARCH_CLIENTS,
    paced: bool = True,
) -> dict[str, Any]:
    """Writes of the best cell's clients and size at half its rate (``paced``; else as fast
    as they go), beside ``search_clients`` clients sending ``search`` (first pages of
    ``owners`` by default; none: the writes alone)."""
    clients, rows = best["clients"], best["rows_per_request"]
    target_tps = best["tps"] / 2
    writes, searches = await asyncio.gather(
        traffic.send_for(
            http,
            traffic.writer(owners, rows),
            seconds,
            clients,
            "mixed: writes",
            pace_s=clients / target_tps if paced else 0.0,
        ),
        traffic.send_for(
            http, search or traffic.searcher(owners), seconds, search_clients, "mixed: searches"
        ),
    )
    rows_per_s = len(writes) * rows / seconds
    return {
        "clients": clients,
        "rows_per_request": rows,
        "target_rows_per_s": round(target_tps * rows),
        "rows_per_s": round(rows_per_s),
        "kept": round(rows_per_s / (target_tps * rows), 3),
        "write_latency": cells.latency_ms(writes),
        "search_clients": search_clients,
        "search_latency": cells.latency_ms(searches) if searches else None,
    }


async def measure(
    http: httpx.AsyncClient, shard: PostgresInstance, args: argparse.Namespace
) -> dict[str, Any]:
    owners = [f"grid-{n}" for n in range(args.owners)]
    # Day tables exist before the first cell: their creation is nobody's latency.
    await traffic.send_count(http, traffic.writer(owners, 1), len(owners), 1, "day tables")
    planned = list(cells.cells(numbers(args.clients), numbers(args.rows)))
    progress = Progress("grid", len(planned), unit="cells", every_s=0)
    grid = []
    for planned_cell in planned:
        cell = await cells.measure(http, planned_cell, owners, args.runs, args.seconds)
        grid.append(cell)
        print(
            f"  {cell['clients']} clients x {cell['rows_per_request']} rows: {cell['tps']} tps, "
            f"{cell['rows_per_s']:,} rows/s, avg {cell['avg_ms']} p90 {cell['p90_ms']} "
            f"max {cell['max_ms']} ms",
            flush=True,
        )
        progress.advance()
    best = max(grid, key=lambda cell: cell["rows_per_s"])
    mix = await mixed(http, best, owners, args.mixed_seconds)
    print(f"  mixed: {mix}", flush=True)
    index = await time_index.compare(shard, args.index_rows)
    print(f"  time index: {index}", flush=True)
    return {
        "params": {
            "runs": args.runs,
            "seconds": args.seconds,
            "owners": args.owners,
            "shards": args.shards,
            "mixed_seconds": args.mixed_seconds,
            "index_rows": args.index_rows,
        },
        "cells": grid,
        "best": best,
        "mixed": mix,
        "time_index": index,
        "targets": {
            "mixed_write_rate_kept": verdict(mix["kept"], KEPT_SHARE, at_most=False),
            "mixed_search_p90_ms": verdict(mix["search_latency"]["p90_ms"], SEARCH_P90_MS),
        },
    }


def plot(payload: dict[str, Any]) -> Any:
    def draw(figure: Any) -> None:
        sizes = sorted({cell["rows_per_request"] for cell in payload["cells"]})
        panels = (
            ("rows_per_s", "rows/s", "rows/s by clients", True),
            ("avg_ms", "ms per request", "average latency by clients", True),
            ("p90_ms", "ms per request", "p90 latency by clients", True),
        )
        for position, (key, unit, title, log_scale) in enumerate(panels, start=1):
            axes = figure.add_subplot(1, 3, position)
            for size in sizes:
                line = [c for c in payload["cells"] if c["rows_per_request"] == size]
                axes.plot(
                    [c["clients"] for c in line],
                    [c[key] for c in line],
                    marker="o",
                    label=f"{size:,} rows/request",
                )
            axes.set_xscale("log", base=2)
            if log_scale:
                axes.set_yscale("log")
            axes.set_xlabel("clients")
            axes.set_ylabel(unit)
            axes.set_title(title)
            axes.legend(fontsize=8)

    return draw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.grid")
    parser.add_argument("--clients", default="1,2,4,8", help="client counts, comma-separated")
    parser.add_argument("--rows", default="1,10,1000", help="rows per request, comma-separated")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds per run")
    parser.add_argument("--mixed-seconds", type=float, default=20.0)
    parser.add_argument("--index-rows", type=int, default=1_000_000)
    parser.add_argument("--owners", type=int, default=16)
    parser.add_argument("--shards", type=int, default=12)
    parser.add_argument("--quick", action="store_true")
    cluster_run.add_cluster_flags(parser, "var/bench-grid")
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.rows, args.runs, args.seconds = "1,4", "1,1000", 1, 3.0
        args.mixed_seconds, args.index_rows = 5.0, 100_000
    settings = bench_settings(
        args.data_dir, shards=args.shards, base_port=args.base_port, router_port=args.router_port
    )
    payload = cluster_run.run(
        settings, args.keep, lambda http, cluster: measure(http, cluster.shards[0], args)
    )
    json_path, png_path = write_results(NAME, payload, plot(payload), mode=mode_of(parser, args))
    print(f"  wrote {json_path} and {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
