"""bench/auth: what authentication costs. Three routers on one cluster (the default 12
shards): one with tokens (SHARDLOG_AUTH__MODE=tokens, a token whose limits are high enough never
to refuse but are checked on every request), one open (SHARDLOG_AUTH__MODE=open), and a second
open one as the control (what two processes doing the same work differ by on this machine).
The same workloads run on all three in small chunks, the routers taking turns chunk by chunk
(the order rotating), each writing and reading owners of its own:

- ingest of audit rows, NDJSON, 100 rows per request (small requests: where a per-request cost
  shows most) and 1,000 rows per request, 4 clients;
- first pages of an audit search (limit 100, one hour of an owner with 20,000 rows), 4 clients.

For each: wall time and the CPU time the router process spent (from /proc/PID/task/*/schedstat,
in nanoseconds), summed over the rounds, and the ratios tokens/open and control/open (cost =
ratio - 1; the target is at most 3 %). Writes bench/results/auth.{json,png}.

    python -m bench.auth [--rounds 20] [--shards 12]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.harness import (
    bench_cluster,
    bench_settings,
    router_env,
    write_results,
)
from router.auth import store as auth_store
from router.auth.scopes import SCOPES, SYSTEM_TENANT
from router.db import pools
from router.settings import Settings
from services.process import free_port
from services.router_process import RouterProcess

CLIENTS = 4
TARGET_COST = 0.03
SEARCH_ROWS = 20_000
NOW = datetime.now(UTC)


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of a process so far, to the nanosecond (/proc/PID/stat counts
    in ticks of 10 ms: too coarse for a few percent of a second)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that ended meanwhile
    return total / 1e9


def limited_token(settings: Settings) -> dict[str, str]:
    """Every scope with limits so high they never refuse, but are checked on every request
    (a token without limits would skip the buckets)."""

    async def make() -> str:
        connection = await pools.connect_metadata(settings.metadata_dsn(), settings.metadata)
        try:
            _, text = await auth_store.create_token(
                connection,
                SYSTEM_TENANT,
                "bench auth",
                SCOPES,
                "bench",
                limits=auth_store.TokenLimits(1e9, 2**50, 10_000),
            )
            return text
        finally:
            await connection.close()

    return {"Authorization": f"Bearer {asyncio.run(make())}"}


def ndjson(owner: str, rows: int, start: int) -> bytes:
    return b"".join(
        orjson.dumps({"owner": owner, "content": f"user {i} changed key {i % 97} of 4242"}) + b"\n"
        for i in range(start, start + rows)
    )


async def post_all(url: str, headers: dict[str, str], bodies: list[bytes]) -> None:
    async def client(mine: list[bytes]) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=300, headers=headers) as http:
            for body in mine:
                answer = await http.post(
                    "/v1/audit", content=body, headers={"content-type": "application/x-ndjson"}
                )
                if answer.status_code != 200:
                    raise RuntimeError(f"{answer.status_code} {answer.text[:300]}")

    await asyncio.gather(*(client(bodies[i::CLIENTS]) for i in range(CLIENTS)))


async def search_all(url: str, headers: dict[str, str], owner: str, requests: int) -> None:
    params: dict[str, str | int] = {
        "owner": owner,
        "from": (NOW - timedelta(hours=1)).isoformat(),
        "to": (NOW + timedelta(minutes=5)).isoformat(),
        "limit": 100,
    }

    async def client(count: int) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=300, headers=headers) as http:
            for _ in range(count):
                answer = await http.get("/v1/audit/search", params=params)
                if answer.status_code != 200 or len(answer.json()["items"]) != 100:
                    raise RuntimeError(f"{answer.status_code} {answer.text[:300]}")

    await asyncio.gather(*(client(requests // CLIENTS) for _ in range(CLIENTS)))


Workload = Callable[[str, dict[str, str], str], Coroutine[Any, Any, None]]
MODES = ("open", "tokens", "control")


def workloads(searches: int, small: int, large: int) -> dict[str, Workload]:
    """One chunk of each workload; every call of an ingest chunk writes new rows."""
    counter = {"n": 0}

    def ingest(rows: int, requests: int) -> Workload:
        async def run(url: str, headers: dict[str, str], mode: str) -> None:
            counter["n"] += 1
            owner = f"bench-auth-{mode}-{rows}"
            first = counter["n"] * requests * rows
            bodies = [ndjson(owner, rows, first + r * rows) for r in range(requests)]
            await post_all(url, headers, bodies)

        return run

    async def search(url: str, headers: dict[str, str], mode: str) -> None:
        await search_all(url, headers, f"bench-auth-{mode}-search", searches)

    return {
        "ingest_100_rows": ingest(100, small),
        "ingest_1000_rows": ingest(1000, large),
        "search_first_page": search,
    }


def measure(
    run: Workload, router: RouterProcess, headers: dict[str, str], mode: str
) -> tuple[float, float]:
    pid = router.pid()
    assert pid is not None
    cpu = cpu_seconds(pid)
    started = time.perf_counter()
    asyncio.run(run(router.url, headers, mode))
    return time.perf_counter() - started, cpu_seconds(pid) - cpu


def summarize(samples: dict[str, list[tuple[float, float]]]) -> dict[str, Any]:
    """Totals over the rounds, their ratios to the open router's, and the median of the
    rounds' own ratios (each round ran the modes back to back)."""
    wall = {mode: sum(s[0] for s in runs) for mode, runs in samples.items()}
    cpu = {mode: sum(s[1] for s in runs) for mode, runs in samples.items()}

    def per_round(mode: str, index: int) -> float:
        pairs = zip(samples[mode], samples["open"], strict=True)
        return statistics.median(a[index] / b[index] for a, b in pairs)

    result: dict[str, Any] = {
        "wall_s": {m: round(v, 4) for m, v in wall.items()},
        "router_cpu_s": {m: round(v, 4) for m, v in cpu.items()},
    }
    for mode in ("tokens", "control"):
        result[mode] = {
            "wall_ratio": round(wall[mode] / wall["open"], 4),
            "router_cpu_ratio": round(cpu[mode] / cpu["open"], 4),
            "median_round_wall_ratio": round(per_round(mode, 0), 4),
            "median_round_cpu_ratio": round(per_round(mode, 1), 4),
        }
    return result


def plot(payload: dict[str, Any]) -> Callable[[Any], None]:
    def draw(figure: Any) -> None:
        axis = figure.add_subplot(1, 1, 1)
        names = list(payload["workloads"])
        bars = (
            ("tokens", "wall_ratio", "tokens: wall time"),
            ("tokens", "router_cpu_ratio", "tokens: router CPU"),
            ("control", "wall_ratio", "control (open again): wall time"),
            ("control", "router_cpu_ratio", "control (open again): router CPU"),
        )
        width = 0.2
        for offset, (mode, key, label) in enumerate(bars):
            values = [(payload["workloads"][n][mode][key] - 1) * 100 for n in names]
            axis.bar([i + offset * width for i in range(len(names))], values, width, label=label)
        axis.axhline(TARGET_COST * 100, color="red", linestyle="--", label="target: +3 %")
        axis.axhline(0, color="black", linewidth=0.5)
        axis.set_xticks([i + 1.5 * width for i in range(len(names))], names)
        axis.set_ylabel("vs the open router (%)")
        axis.set_title("bench/auth: authentication on vs off (totals over interleaved rounds)")
        axis.legend()

    return draw


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.auth")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--shards", type=int, default=12)
    parser.add_argument("--searches", type=int, default=100, help="first pages per chunk")
    parser.add_argument("--small", type=int, default=100, help="100-row writes per chunk")
    parser.add_argument("--large", type=int, default=20, help="1,000-row writes per chunk")
    parser.add_argument("--data-dir", type=Path, default=Path("var/bench"))
    parser.add_argument("--keep", action="store_true", help="keep the benchmark cluster's data")
    args = parser.parse_args()
    settings = bench_settings(args.data_dir, shards=args.shards)
    runs = workloads(args.searches, args.small, args.large)
    samples: dict[str, dict[str, list[tuple[float, float]]]] = {
        name: {mode: [] for mode in MODES} for name in runs
    }
    try:
        with bench_cluster(settings) as (_cluster, tokens_router):
            assert tokens_router is not None
            opened: list[RouterProcess] = []
            try:
                for name in ("open", "control"):
                    opened.append(open_router(settings, args.data_dir / name))
                routers = {"tokens": tokens_router, "open": opened[0], "control": opened[1]}
                headers = {"open": {}, "control": {}, "tokens": limited_token(settings)}
                print("warm-up: the search owners' rows, a chunk of each workload", flush=True)
                for mode in MODES:
                    owner = f"bench-auth-{mode}-search"
                    bodies = [ndjson(owner, 2_000, n * 2_000) for n in range(SEARCH_ROWS // 2_000)]
                    asyncio.run(post_all(routers[mode].url, headers[mode], bodies))
                    for run in runs.values():
                        measure(run, routers[mode], headers[mode], mode)
                for number in range(args.rounds):
                    order = MODES[number % 3 :] + MODES[: number % 3]
                    for name, run in runs.items():
                        for mode in order:
                            samples[name][mode].append(
                                measure(run, routers[mode], headers[mode], mode)
                            )
                    print(f"  round {number + 1}/{args.rounds}", flush=True)
            finally:
                for router in opened:
                    router.stop()
    finally:
        if not args.keep:
            shutil.rmtree(args.data_dir, ignore_errors=True)

    results = {name: summarize(by_mode) for name, by_mode in samples.items()}
    print()
    for name, result in results.items():
        for mode in ("tokens", "control"):
            ratios = result[mode]
            print(
                f"{name:18} {mode:7}/open: wall {ratios['wall_ratio']:.4f}, router CPU "
                f"{ratios['router_cpu_ratio']:.4f} (median of rounds: "
                f"{ratios['median_round_wall_ratio']:.4f}, {ratios['median_round_cpu_ratio']:.4f})"
            )
    payload = {
        "rounds": args.rounds,
        "shards": args.shards,
        "clients": CLIENTS,
        "chunk": {"searches": args.searches, "small": args.small, "large": args.large},
        "target_cost_pct": TARGET_COST * 100,
        "machine_note": "2 cores shared with other work; routers + PostgreSQL + client on one host",
        "workloads": results,
    }
    json_path, png_path = write_results("auth", payload, plot(payload))
    print(f"wrote {json_path} and {png_path}")
    return 0


def open_router(settings: Settings, home: Path) -> RouterProcess:
    port = free_port()
    router = RouterProcess(
        home,
        settings.server.host,
        port,
        env={
            **router_env(settings),
            "SHARDLOG_SERVER__PORT": str(port),
            "SHARDLOG_AUTH__MODE": "open",
        },
    )
    router.start()
    return router


if __name__ == "__main__":
    sys.exit(main())
