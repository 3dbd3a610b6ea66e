"""bench/auth: what authentication costs the router, two ways, on one cluster (the default 12
shards; every router's owners mapped to the same group), with a token whose limits are high
enough never to refuse but are checked on every request:

- **one process, three apps** (`bench/auth/twin.py`): the router served by one process open
  (SHARDLOG_AUTH__MODE=open) on one port, with tokens on another, and open again on a third
  (the A/A pair); the process's CPU is read around each turn. Same interpreter, heap and hash
  seed: the difference is authentication alone, or noise, which the A/A pair shows. This is
  the figure the target is about.
- **separate routers** (`shardlog serve`, as deployed): two open and two with tokens, because
  two processes doing the same work differ by a few percent on this machine; each pair shows
  by how much.

Workloads, run in small chunks with every router taking its turn (the order rotating), each
router writing and reading owners of its own:

- ingest of audit rows, NDJSON, 100 rows per request (small requests: where a per-request cost
  shows most) and 1,000 rows per request, 4 clients;
- first pages of an audit search (limit 100, one hour of an owner with 24,000 rows on every
  shard of its group), 4 clients.

CPU comes from /proc/PID/task/*/schedstat (nanoseconds); the cost is the tokens total over the
open total, minus 1 (target: at most 3 %). Beside each cost, the A/A spread of the same run:
how far apart the one process's two open apps came, doing the same work in the same rounds. A
cost whose magnitude is inside that spread is "no measurable cost": the target is then met
only in that sense; a cost above the spread and above 3 % is a miss. Beside them,
the token check alone, timed in process (registry, buckets, scope), against the router's CPU
per request. Writes bench/results/auth.{json,png}.

    python -m bench.auth [--rounds 16] [--shards 12]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.harness import (
    bench_cluster,
    bench_settings,
    cpu_seconds,
    router_env,
    verdict,
    write_results,
)
from bench.stamps import mode_of
from router import clock
from router.auth import store as auth_store
from router.auth.registry import TokenRegistry
from router.auth.scopes import AUDIT_WRITE, SCOPES, SYSTEM_TENANT, check_scope
from router.db import catalog_login
from router.settings import Settings
from services import process
from services.process import free_port
from services.router_process import RouterProcess

CLIENTS = 4
TARGET_COST = 0.03
SEARCH_ROWS = 24_000
NOW = clock.now()


def limited_token(settings: Settings) -> dict[str, str]:
    """Every scope with limits so high they never refuse, but are checked on every request
    (a token without limits would skip the buckets)."""

    async def make() -> str:
        connection = await catalog_login.connect(settings)
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


def check_micro_seconds(settings: Settings, headers: dict[str, str], calls: int = 200_000) -> float:
    """Seconds per request of what a token costs the router's CPU besides the dependency
    every route has in either mode: the registry (loaded from the bench catalog, as a router
    loads it) authenticating the header, the request-rate and byte-rate buckets, the scope."""

    async def load() -> TokenRegistry:
        metadata = await catalog_login.open_pool(settings)
        try:
            registry = TokenRegistry(metadata, settings.auth)
            await registry.load()
            return registry
        finally:
            await metadata.close()

    registry = asyncio.run(load())
    header = headers["Authorization"]
    started = time.perf_counter()
    for _ in range(calls):
        caller = registry.authenticate(header)
        assert caller.limiter is not None
        caller.limiter.admit()
        caller.limiter.admit_write()
        check_scope(caller.grant, AUDIT_WRITE)
    return (time.perf_counter() - started) / calls


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
MODES = ("twin_open", "twin_tokens", "twin_open_b", "open", "tokens", "open_b", "tokens_b")
OPEN, TOKENS = ("open", "open_b"), ("tokens", "tokens_b")


@dataclass(frozen=True)
class Target:
    """Where a mode's requests go, and the process whose CPU they cost."""

    url: str
    pid: Callable[[], int | None]


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
    run: Workload, target: Target, headers: dict[str, str], mode: str
) -> tuple[float, float]:
    pid = target.pid()
    assert pid is not None
    cpu = cpu_seconds(pid)
    started = time.perf_counter()
    asyncio.run(run(target.url, headers, mode))
    return time.perf_counter() - started, cpu_seconds(pid) - cpu


def summarize(samples: dict[str, list[tuple[float, float]]]) -> dict[str, Any]:
    """Totals over the rounds per mode; the cost in one process (tokens app over open app) and
    across processes (tokens routers over open routers), and the spread within each pair of
    separate routers (the second over the first: what noise alone makes)."""
    wall = {mode: sum(s[0] for s in runs) for mode, runs in samples.items()}
    cpu = {mode: sum(s[1] for s in runs) for mode, runs in samples.items()}

    def ratio(totals: dict[str, float], upper: tuple[str, ...], lower: tuple[str, ...]) -> float:
        return round(sum(totals[m] for m in upper) / sum(totals[m] for m in lower), 4)

    def paired(upper: str, lower: str, index: int) -> float:
        """The median of the rounds' own ratios: each round ran both back to back, so a slow
        stretch of the machine weighs on both sides of a pair."""
        pairs = zip(samples[upper], samples[lower], strict=True)
        return round(statistics.median(a[index] / b[index] for a, b in pairs), 4)

    return {
        "wall_s": {m: round(v, 4) for m, v in wall.items()},
        "router_cpu_s": {m: round(v, 4) for m, v in cpu.items()},
        "one_process": {
            "router_cpu_ratio": ratio(cpu, ("twin_tokens",), ("twin_open",)),
            "wall_ratio": ratio(wall, ("twin_tokens",), ("twin_open",)),
            "median_round_cpu_ratio": paired("twin_tokens", "twin_open", 1),
            "median_round_wall_ratio": paired("twin_tokens", "twin_open", 0),
            "open_b/open cpu": ratio(cpu, ("twin_open_b",), ("twin_open",)),
            "open_b/open wall": ratio(wall, ("twin_open_b",), ("twin_open",)),
        },
        "separate_routers": {
            "router_cpu_ratio": ratio(cpu, TOKENS, OPEN),
            "wall_ratio": ratio(wall, TOKENS, OPEN),
            "open_b/open cpu": ratio(cpu, ("open_b",), ("open",)),
            "tokens_b/tokens cpu": ratio(cpu, ("tokens_b",), ("tokens",)),
            "open_b/open wall": ratio(wall, ("open_b",), ("open",)),
            "tokens_b/tokens wall": ratio(wall, ("tokens_b",), ("tokens",)),
        },
        "samples": {
            m: [[round(w, 4), round(c, 4)] for w, c in runs] for m, runs in samples.items()
        },
    }


def aa_spread(result: dict[str, Any]) -> float:
    """The run's A/A spread for one workload: how far apart, in router CPU, the one process's
    two open apps came doing the same work (the noise of the cost's own comparison)."""
    return round(abs(float(result["one_process"]["open_b/open cpu"]) - 1), 4)


def reading(cost: float, spread: float, met: bool) -> str:
    """What a cost means beside the A/A spread of its run."""
    if abs(cost) <= spread:
        sense = (
            "the target is met only in that sense"
            if met
            else "the spread is wider than the target: this run cannot tell"
        )
        return f"no measurable cost: {cost:+.1%} is inside the A/A spread (±{spread:.1%}); {sense}"
    if cost < 0:
        return (
            f"no measurable cost: tokens came out {cost:+.1%} cheaper, beyond the A/A spread "
            f"(±{spread:.1%}): noise the A/A pairs did not show; the target is met only in "
            "that sense"
        )
    if met:
        return f"a measurable cost of {cost:+.1%}, above the A/A spread (±{spread:.1%}), within 3 %"
    return f"a miss: {cost:+.1%} is above the A/A spread (±{spread:.1%}) and above 3 %"


def cost_verdict(result: dict[str, Any]) -> dict[str, Any]:
    """The one-process cost against the target, the run's A/A spread and the reading beside
    it."""
    cost = round(result["one_process"]["router_cpu_ratio"] - 1, 4)
    outcome = verdict(cost, TARGET_COST)
    spread = aa_spread(result)
    return {**outcome, "aa_spread": spread, "reading": reading(cost, spread, outcome["met"])}


def plot(payload: dict[str, Any]) -> Callable[[Any], None]:
    def draw(figure: Any) -> None:
        axis = figure.add_subplot(1, 1, 1)
        names = list(payload["workloads"])
        bars = (
            (("one_process", "router_cpu_ratio"), "one process: tokens vs open, CPU"),
            (("one_process", "wall_ratio"), "one process: tokens vs open, wall"),
            (("one_process", "open_b/open cpu"), "one process: open vs open (A/A), CPU"),
            (("separate_routers", "router_cpu_ratio"), "separate routers: tokens vs open, CPU"),
            (("separate_routers", "open_b/open cpu"), "separate routers: open vs open, CPU"),
            (("separate_routers", "tokens_b/tokens cpu"), "separate: tokens vs tokens, CPU"),
        )
        width = 0.13
        for offset, (keys, label) in enumerate(bars):
            heights = []
            for name in names:
                value: Any = payload["workloads"][name]
                for key in keys:
                    value = value[key]
                heights.append((float(value) - 1) * 100)
            axis.bar([i + offset * width for i in range(len(names))], heights, width, label=label)
        axis.axhline(TARGET_COST * 100, color="red", linestyle="--", label="target: +3 %")
        for index, name in enumerate(names):
            spread = payload["targets"][f"{name}_cost"]["aa_spread"] * 100
            axis.hlines(
                [spread, -spread],
                index - width / 2,
                index + width * (len(bars) - 0.5),
                colors="grey",
                linestyles=":",
                label="A/A spread (one process)" if index == 0 else None,
            )
        axis.axhline(0, color="black", linewidth=0.5)
        axis.set_xticks([i + width * (len(bars) - 1) / 2 for i in range(len(names))], names)
        axis.set_ylabel("difference (%)")
        axis.set_title("bench/auth: authentication on vs off (totals over interleaved rounds)")
        axis.legend()

    return draw


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.auth")
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--shards", type=int, default=12)
    parser.add_argument("--searches", type=int, default=60, help="first pages per chunk")
    parser.add_argument("--small", type=int, default=60, help="100-row writes per chunk")
    parser.add_argument("--large", type=int, default=12, help="1,000-row writes per chunk")
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
            routers = {"tokens": tokens_router}
            twin: subprocess.Popen[bytes] | None = None
            try:
                for mode in ("open", "open_b", "tokens_b"):
                    auth = "open" if mode in OPEN else "tokens"
                    routers[mode] = another_router(settings, args.data_dir / mode, auth)
                twin, twin_ports = start_twin(settings, args.data_dir / "twin")
                twin_pid = twin.pid
                targets = {mode: Target(r.url, r.pid) for mode, r in routers.items()}
                for mode, port in twin_ports.items():
                    url = f"http://{settings.server.host}:{port}"
                    targets[f"twin_{mode}"] = Target(url, lambda: twin_pid)
                token = limited_token(settings)
                headers = {
                    mode: token if mode.endswith("tokens") or mode in TOKENS else {}
                    for mode in MODES
                }
                place_owners(targets["tokens"].url, token)
                micro = check_micro_seconds(settings, token)
                print(f"token check: {micro * 1e6:.2f} us per request", flush=True)
                print("warm-up: the search owners' rows, a chunk of each workload", flush=True)
                for mode in MODES:
                    owner = f"bench-auth-{mode}-search"
                    half = SEARCH_ROWS // 2  # a part per shard of the group: on every shard
                    bodies = [ndjson(owner, half, n * half) for n in range(2)]
                    asyncio.run(post_all(targets[mode].url, headers[mode], bodies))
                    for run in runs.values():
                        measure(run, targets[mode], headers[mode], mode)
                for number in range(args.rounds):
                    turn = number % len(MODES)
                    order = MODES[turn:] + MODES[:turn]
                    for name, run in runs.items():
                        for mode in order:
                            samples[name][mode].append(
                                measure(run, targets[mode], headers[mode], mode)
                            )
                    print(f"  round {number + 1}/{args.rounds}", flush=True)
            finally:
                if twin is not None:
                    process.terminate(twin.pid, timeout=15)
                for mode, router in routers.items():
                    if mode != "tokens":  # the harness's own
                        router.stop()
    finally:
        if not args.keep:
            shutil.rmtree(args.data_dir, ignore_errors=True)

    results = {name: summarize(by_mode) for name, by_mode in samples.items()}
    requests = {
        "ingest_100_rows": args.small,
        "ingest_1000_rows": args.large,
        "search_first_page": args.searches,
    }
    print()
    for name, result in results.items():
        per_request = result["router_cpu_s"]["twin_open"] / (requests[name] * args.rounds)
        result["router_cpu_us_per_request"] = round(per_request * 1e6, 1)
        result["token_check_share_pct"] = round(micro / per_request * 100, 3)
        one, separate = result["one_process"], result["separate_routers"]
        print(
            f"{name:18} one process: CPU {one['router_cpu_ratio']:.4f} (median of rounds "
            f"{one['median_round_cpu_ratio']:.4f}) wall {one['wall_ratio']:.4f}, open/open "
            f"{one['open_b/open cpu']:.4f}; separate "
            f"routers: CPU {separate['router_cpu_ratio']:.4f} (open/open "
            f"{separate['open_b/open cpu']:.4f}, tokens/tokens "
            f"{separate['tokens_b/tokens cpu']:.4f}); router CPU "
            f"{result['router_cpu_us_per_request']} us per request, the token check "
            f"{micro * 1e6:.2f} us of it"
        )
    payload = {
        "rounds": args.rounds,
        "shards": args.shards,
        "clients": CLIENTS,
        "chunk": {"searches": args.searches, "small": args.small, "large": args.large},
        "target_cost_pct": TARGET_COST * 100,
        "targets": {f"{name}_cost": cost_verdict(result) for name, result in results.items()},
        "token_check_us": round(micro * 1e6, 3),
        "machine_note": "2 cores shared with other work; routers + PostgreSQL + client on one host",
        "workloads": results,
    }
    json_path, png_path = write_results("auth", payload, plot(payload), mode=mode_of(parser, args))
    for name, outcome in payload["targets"].items():
        shortfall = "" if outcome["met"] else "SHORTFALL "
        print(f"{shortfall}{name}: {outcome['reading']} (target at most +3 %)")
    print(f"wrote {json_path} and {png_path}")
    return 0


def place_owners(url: str, admin: dict[str, str]) -> None:
    """Every mode's owners in one group (the first), each of the tenant its router writes
    for: rows of different groups land on different PostgreSQL instances, whose commit times
    differ by more than what is measured here."""
    with httpx.Client(base_url=url, timeout=60, headers=admin) as client:
        groups = sorted(g["name"] for g in client.get("/v1/admin/groups").json() if g["shards"])
        for mode in MODES:
            tenant = SYSTEM_TENANT if mode.endswith("tokens") or mode in TOKENS else "default"
            for suffix in ("100", "1000", "search"):
                body = {"kind": "audit", "key": f"bench-auth-{mode}-{suffix}", "group": groups[0]}
                mapped = client.put("/v1/admin/owners", json={**body, "tenant": tenant})
                if mapped.status_code != 200:
                    raise RuntimeError(f"mapping an owner: {mapped.status_code} {mapped.text}")


def start_twin(settings: Settings, home: Path) -> tuple[subprocess.Popen[bytes], dict[str, int]]:
    """bench/auth/twin.py as a process of its own, once all its apps answer."""
    ports = {"open": free_port(), "tokens": free_port(), "open_b": free_port()}
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "twin.log", "ab") as log:
        twin = subprocess.Popen(
            [sys.executable, "-m", "bench.auth.twin", *(str(port) for port in ports.values())],
            env={**os.environ, **router_env(settings)},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 60
    for port in ports.values():
        url = f"http://{settings.server.host}:{port}/health/live"
        while True:
            try:
                if httpx.get(url, timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if twin.poll() is not None or time.monotonic() > deadline:
                process.terminate(twin.pid, timeout=5)
                raise RuntimeError(f"the twin router did not come up; see {home / 'twin.log'}")
            time.sleep(0.2)
    return twin, ports


def another_router(settings: Settings, home: Path, auth: str) -> RouterProcess:
    """A router on the bench cluster, with SHARDLOG_AUTH__MODE=``auth``."""
    port = free_port()
    env = {**router_env(settings), "SHARDLOG_SERVER__PORT": str(port), "SHARDLOG_AUTH__MODE": auth}
    router = RouterProcess(home, settings.server.host, port, env=env)
    router.start()
    return router


if __name__ == "__main__":
    sys.exit(main())
