"""bench/search/rate: the request rate of small first pages (limit 10, one owner, a random
one-hour window of a loaded day) with 8 clients, for owners spread over the whole 6-shard group
(every owner before the spread width) against owners of spread SHARDLOG_INGEST__SPREAD_MIN_SHARDS
(a small owner: its rows on that many shards of its group, so a search asks only those), and
of spread 1 or 2 (the other) for comparison, side by side in one run, in turns, medians of
the repeats. Rows are loaded by COPY straight into each owner's day table on the shards the
router would place them on (placement.spread_shards) and registered, as bench/search loads.
The clients send their requests over keep-alive connections of bench/http_client.py (a lean
client: on two shared cores an httpx client took a third of the machine's CPU per request).
Prints requests/s and CPU per request: the router process, the cluster's PostgreSQL processes,
and the whole machine (other work on it included). Target: spread >= 2x the whole group's
requests/s, both on this router (the headline). Beside it, as context, the router of an older
commit (``--baseline-commit``, by default d7a2a22, the one before issue 20), checked out in a
temporary git worktree and run beside this one on the same cluster, asks for the whole-group
owners' pages too: the whole group as a user had it then; its ratio is recorded with the
commit. Writes bench/results/search_rate.{json,png}.

    python -m bench.search.rate [--owners 16] [--rows-per-owner 40000] [--seconds 10]
        [--baseline-commit SHA | --no-baseline]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench import baseline
from bench.harness import (
    BENCH_BASE_PORT,
    BENCH_ROUTER_PORT,
    auth_for,
    baseline_router,
    bench_cluster,
    bench_settings,
    cpu_seconds,
    grouped_bars,
    machine_busy_seconds,
    verdict,
    write_results,
)
from bench.http_client import LeanClient
from bench.search.__main__ import random_batches
from bench.search.shards import shard_connections
from bench.stamps import mode_of
from router import clock
from router.catalog import store
from router.db import catalog_login
from router.db.names import day_table
from router.routing import placement
from router.settings import IngestSettings
from services.router_process import RouterProcess

CLIENTS = 8
TARGET_RATIO = 2.0
GROUPS = ("group1", "group2")


async def load(
    settings: Any, url: str, owners: dict[str, int | None], rows: int, day: datetime
) -> dict[str, list[str]]:
    """Map every owner (by hand, alternating groups), give it its spread, copy its rows onto
    its spread's shards. Returns each owner's shards."""
    placed: dict[str, list[str]] = {}
    async with httpx.AsyncClient(base_url=url, timeout=60, headers=auth_for(url)) as http:
        for number, key in enumerate(owners):
            mapped = await http.put(
                "/v1/admin/owners",
                json={
                    "kind": "audit",
                    "key": key,
                    "group": GROUPS[number % 2],
                    "tenant": "system",
                },
            )
            mapped.raise_for_status()
    connection = await catalog_login.connect(settings)
    try:
        mappings = {
            key: await store.set_spread(connection, "audit", key, owners[key]) for key in owners
        }
    finally:
        await connection.close()
    async with shard_connections(settings) as shards:
        for number, (key, mapping) in enumerate(mappings.items()):
            group = shards.of(mapping.group)
            subset = placement.spread_shards(mapping.id, group, mapping.spread, set(group))
            table = day_table("audit", mapping.id, day)
            await shards.copy(table, subset, random_batches(rows, day, seed=number))
            placed[key] = subset
            print(f"  loaded {rows:,} rows of {key} onto {len(subset)} shards", flush=True)
        await shards.settle()
    return placed


def postgres_pids(data_dir: Path) -> list[int]:
    """The benchmark cluster's PostgreSQL processes: its postmasters (started with a data
    directory under ``data_dir``) and their children (backends, background workers)."""
    parents: dict[int, int] = {}
    masters: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        if str(data_dir).encode() in command:
            masters.add(int(entry.name))
    return sorted(masters | {pid for pid, parent in parents.items() if parent in masters})


def postgres_cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            total += cpu_seconds(pid)
        except OSError:
            continue  # ended meanwhile
    return total


async def run_clients(
    url: str, owners: list[str], day: datetime, seconds: float, pid: int, data_dir: Path
) -> dict[str, float]:
    """CLIENTS clients asking small first pages of random owners and hours for ``seconds``."""
    latencies: list[float] = []
    errors = 0
    deadline = 0.0

    async def client(number: int) -> None:
        nonlocal errors
        rng = random.Random(number)
        lean = LeanClient(url, auth_for(url))
        try:
            while time.monotonic() < deadline:
                start = day + timedelta(seconds=rng.randrange(0, 23 * 3600))
                params: dict[str, str | int] = {
                    "owner": rng.choice(owners),
                    "from": start.isoformat(),
                    "to": (start + timedelta(hours=1)).isoformat(),
                    "limit": 10,
                }
                began = time.perf_counter()
                status, answer = await lean.send(lean.get("/v1/audit/search", params))
                if status != 200 or len(orjson.loads(answer)["items"]) != 10:
                    errors += 1
                latencies.append((time.perf_counter() - began) * 1000)
        finally:
            await lean.close()

    # Backends live as long as the router's pooled connections: those of the run are there
    # at its start (the warm-up opened them).
    pids = postgres_pids(data_dir)
    cpu, busy, began = cpu_seconds(pid), machine_busy_seconds(), time.monotonic()
    pg = postgres_cpu(pids)
    deadline = began + seconds
    await asyncio.gather(*(client(n) for n in range(CLIENTS)))
    elapsed = time.monotonic() - began
    pg = postgres_cpu(pids) - pg
    requests = len(latencies)
    return {
        "requests": requests,
        "errors": errors,
        "requests_per_s": requests / elapsed,
        "router_cpu_ms_per_request": 1000 * (cpu_seconds(pid) - cpu) / requests,
        "postgres_cpu_ms_per_request": 1000 * pg / requests,
        "machine_cpu_ms_per_request": 1000 * (machine_busy_seconds() - busy) / requests,
        "p50_ms": statistics.median(latencies),
    }


async def measure(
    router: RouterProcess, owners: list[str], day: datetime, seconds: float, data_dir: Path
) -> dict[str, float]:
    pid = router.pid()
    assert pid is not None
    return await run_clients(router.url, owners, day, seconds, pid, data_dir)


def take_turns(
    routers: dict[str, RouterProcess],
    owners: dict[str, list[str]],
    day: datetime,
    seconds: float,
    repeats: int,
    data_dir: Path,
) -> dict[str, list[dict[str, float]]]:
    """Every router on its owners in turns (the order rotating each repeat), after a warm-up
    turn each."""
    runners = list(routers)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in runners}
    for name in runners:  # warm-up: plans, pools, caches
        asyncio.run(measure(routers[name], owners[name], day, 2.0, data_dir))
    for repeat in range(repeats):
        order = runners[repeat % len(runners) :] + runners[: repeat % len(runners)]
        for name in order:
            run = asyncio.run(measure(routers[name], owners[name], day, seconds, data_dir))
            runs[name].append(run)
            print(
                f"  {name:<14} {run['requests_per_s']:7.0f} requests/s, router "
                f"CPU {run['router_cpu_ms_per_request']:.2f} ms/request, "
                f"PostgreSQL {run['postgres_cpu_ms_per_request']:.2f} ms/request, "
                f"p50 {run['p50_ms']:.1f} ms, errors {run['errors']:.0f}",
                flush=True,
            )
    return runs


def ratio_of(
    runs: dict[str, list[dict[str, float]]], name: str, against: str
) -> tuple[float, list[float]]:
    """The ratio of each repeat's turns (run one after the other), then their median: the load
    of the rest of the machine moves between repeats more than within one."""
    ratios = [
        n["requests_per_s"] / w["requests_per_s"]
        for n, w in zip(runs[name], runs[against], strict=True)
    ]
    return round(statistics.median(ratios), 3), [round(r, 3) for r in ratios]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--owners", type=int, default=16, help="owners of each kind")
    parser.add_argument("--rows-per-owner", type=int, default=40_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--base-port", type=int, default=BENCH_BASE_PORT)
    parser.add_argument("--router-port", type=int, default=BENCH_ROUTER_PORT)
    parser.add_argument(
        "--baseline-commit",
        default=baseline.BEFORE_ISSUE_20,
        help="the commit whose router runs beside this one on the whole-group owners, as "
        "context (default: %(default)s, the one before issue 20)",
    )
    parser.add_argument("--no-baseline", action="store_true", help="no router of another commit")
    args = parser.parse_args(argv)
    spread = IngestSettings().spread_min_shards or None
    kinds: dict[str, int | None] = {"whole group": None, f"spread {spread}": spread}
    other = 2 if spread == 1 else 1
    kinds[f"spread {other}"] = other  # for comparison (no target)
    owners = {
        name: [f"rate-{name.replace(' ', '')}-{n}" for n in range(args.owners)] for name in kinds
    }
    day = (clock.now() - timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    data_dir = Path(tempfile.mkdtemp(prefix="shardlog-rate-"))
    settings = bench_settings(data_dir, base_port=args.base_port, router_port=args.router_port)
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, data_dir, ignore_errors=True)
        old = (
            None
            if args.no_baseline
            else stack.enter_context(baseline.checkout(args.baseline_commit))
        )
        _, router = stack.enter_context(bench_cluster(settings))
        assert router is not None
        wanted = {key: spread for name, spread in kinds.items() for key in owners[name]}
        placed = asyncio.run(load(settings, router.url, wanted, args.rows_per_owner, day))
        routers = {name: router for name in kinds}
        if old is not None:
            owners[old.label] = owners["whole group"]
            routers[old.label] = baseline_router(settings, data_dir / "baseline", old.code)
            stack.callback(routers[old.label].stop)
        runs = take_turns(routers, owners, day, args.seconds, args.repeats, data_dir)
    medians = {
        name: {key: round(statistics.median(r[key] for r in results), 3) for key in results[0]}
        for name, results in runs.items()
    }
    same_router, same_router_ratios = ratio_of(runs, f"spread {spread}", "whole group")
    errors = sum(r["errors"] for results in runs.values() for r in results)
    # Router + PostgreSQL CPU per request: what bounds the rate on an otherwise idle machine
    # (this one is shared: the rates above move with everything else running on it).
    cpu = {
        name: m["router_cpu_ms_per_request"] + m["postgres_cpu_ms_per_request"]
        for name, m in medians.items()
    }
    cpu_ratio = round(cpu["whole group"] / cpu[f"spread {spread}"], 3)
    shards_asked = {name: len(placed[owners[name][0]]) for name in routers}
    context = None
    if old is not None:
        ratio, ratios = ratio_of(runs, f"spread {spread}", old.label)
        context = {
            **old.record(),
            "label": old.label,
            "ratio_spread_vs_its_whole_group": ratio,
            "ratios_by_repeat": ratios,
            "note": f"context, not the target: this router's spread {spread} owners against "
            f"the router of {old.label} on the whole-group owners, beside it on the same cluster",
        }
    payload = {
        "params": {
            "owners_per_kind": args.owners,
            "rows_per_owner": args.rows_per_owner,
            "rows": len(kinds) * args.owners * args.rows_per_owner,
            "shards": 12,
            "group_shards": 6,
            "clients": CLIENTS,
            "seconds": args.seconds,
            "repeats": args.repeats,
            "limit": 10,
            "window": "1 hour",
        },
        "machine_note": baseline.MACHINE_NOTE,
        "shards_asked": shards_asked,
        "runs": runs,
        "medians": medians,
        "ratio_spread_vs_whole_group_same_router": same_router,
        "same_router_ratios_by_repeat": same_router_ratios,
        "baseline": context,
        "cpu_ms_per_request": {name: round(value, 3) for name, value in cpu.items()},
        "cpu_ratio_whole_group_vs_spread": cpu_ratio,
        "errors": errors,
        "targets": {
            "spread_vs_whole_group_requests_per_s": verdict(
                same_router, TARGET_RATIO, at_most=False
            ),
            "errors": verdict(errors, 0),
        },
    }
    write_results(
        "search_rate", payload, lambda figure: plot(figure, medians), mode=mode_of(parser, args)
    )
    for name, figures in medians.items():
        print(
            f"{name:<14} ({shards_asked[name]} shards asked): {figures['requests_per_s']:.0f} "
            f"requests/s, router CPU {figures['router_cpu_ms_per_request']:.2f} ms/request, "
            f"PostgreSQL CPU {figures['postgres_cpu_ms_per_request']:.2f} ms/request, "
            f"machine CPU {figures['machine_cpu_ms_per_request']:.2f} ms/request, p50 "
            f"{figures['p50_ms']:.1f} ms"
        )
    print(
        f"spread {spread} vs whole group, this router: {same_router:.2f}x requests/s "
        f"(target >= {TARGET_RATIO}x)"
    )
    if context is not None:
        print(
            f"context: spread {spread} vs the whole group on {context['label']}'s router: "
            f"{context['ratio_spread_vs_its_whole_group']:.2f}x requests/s"
        )
    print(f"router + PostgreSQL CPU per request, whole group / spread: {cpu_ratio:.2f}x")
    failed = False
    if same_router < TARGET_RATIO:
        print(
            f"SHORTFALL: spread {spread} {same_router:.2f}x the whole group's requests/s on "
            f"this router (target {TARGET_RATIO}x)"
        )
        failed = True
    if errors:
        print(f"SHORTFALL: {errors:.0f} searches failed or returned fewer than 10 rows")
        failed = True
    return 1 if failed else 0


def plot(figure: Any, medians: dict[str, dict[str, float]]) -> None:
    rate, cpu = figure.subplots(1, 2)
    labels = list(medians)
    grouped_bars(rate, labels, {"requests/s": [m["requests_per_s"] for m in medians.values()]})
    rate.set_title(f"small first pages, {CLIENTS} clients (limit 10, 1 hour)")
    rate.set_ylabel("requests/s")
    grouped_bars(
        cpu,
        labels,
        {
            "router": [m["router_cpu_ms_per_request"] for m in medians.values()],
            "PostgreSQL": [m["postgres_cpu_ms_per_request"] for m in medians.values()],
        },
    )
    cpu.set_ylabel("CPU ms per request")
    cpu.legend()


if __name__ == "__main__":
    sys.exit(main())
