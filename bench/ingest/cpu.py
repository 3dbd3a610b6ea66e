"""Router CPU per row on ingest: 100,000-row NDJSON bodies posted one at a time (audit rows,
then flows), the router process's CPU (every thread, /proc/PID/task/*/schedstat) and the
machine's busy time read around each body, so that each row's cost splits into the router's,
the client's and the rest (the shards' PostgreSQL). Medians of the bodies sent.

    python -m bench.ingest.cpu [--bodies 5] [--rows 100000]

Targets (issue 20): router CPU <= 3.5 us per audit row and <= 8 us per flow.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from bench import baseline
from bench.harness import (
    RESULTS,
    auth_for,
    baseline_router,
    bench_cluster,
    bench_settings,
    cpu_seconds,
    machine_busy_seconds,
    verdict,
    write_results,
)
from bench.ingest import generate
from bench.stamps import mode_of
from services.router_process import RouterProcess

TARGET_US = {"audit": 3.5, "flow": 8.0}
PATHS = {"audit": "/v1/audit", "flow": "/v1/flows"}


async def costs(
    url: str, router_pid: int, kind: str, bodies: list[bytes], rows: int
) -> list[dict[str, float]]:
    """Per body: microseconds of CPU per row in the router, the client and the rest."""
    measured = []
    me = os.getpid()
    async with httpx.AsyncClient(base_url=url, timeout=600, headers=auth_for(url)) as http:
        for body in bodies:
            router_before, client_before = cpu_seconds(router_pid), cpu_seconds(me)
            kernel_before = kernel_seconds(router_pid)
            busy_before, started = machine_busy_seconds(), time.perf_counter()
            response = await http.post(
                PATHS[kind], content=body, headers={"content-type": "application/x-ndjson"}
            )
            wall = time.perf_counter() - started
            if response.status_code != 200:
                raise RuntimeError(f"{kind}: {response.status_code} {response.text[:300]}")
            router = cpu_seconds(router_pid) - router_before
            client = cpu_seconds(me) - client_before
            busy = machine_busy_seconds() - busy_before
            kernel = kernel_seconds(router_pid) - kernel_before
            measured.append(
                {
                    "router_us": router / rows * 1e6,
                    "router_kernel_us": kernel / rows * 1e6,
                    "client_us": client / rows * 1e6,
                    "rest_us": max(busy - router - client, 0.0) / rows * 1e6,
                    "rows_per_s": rows / wall,
                }
            )
    return measured


def kernel_seconds(pid: int) -> float:
    """CPU time the process spent in the kernel (system calls: socket reads and writes), in
    clock ticks of 10 ms: coarse, but a 100,000-row body takes tens of them."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[12]) / os.sysconf("SC_CLK_TCK")


def summary(measured: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.median(m[key] for m in measured), 2) for key in measured[0]}


def plot(payload: dict[str, Any]) -> Any:
    def draw(figure: Any) -> None:
        axes = figure.add_subplot(1, 1, 1)
        bars = [
            (f"{kind}\n{name}", result["median"])
            for kind, routers in payload["kinds"].items()
            for name, result in routers.items()
        ]
        labels = [label for label, _ in bars]
        bottom = [0.0] * len(bars)
        for part in ("router_us", "rest_us", "client_us"):
            values = [median[part] for _, median in bars]
            axes.bar(labels, values, bottom=bottom, label=part.removesuffix("_us"))
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        for index, label in enumerate(labels):
            kind, name = label.split("\n")
            if name != "this":
                continue  # a baseline's bar is context, judged by no target
            target = TARGET_US[kind]
            axes.hlines(target, index - 0.4, index + 0.4, colors="red", linestyles="dashed")
        axes.set_ylabel("CPU µs per row (red: this router's target)")
        sizes = ", ".join(f"{k} {v:,}" for k, v in payload["rows_per_body"].items())
        axes.set_title(f"CPU per row of NDJSON bodies (rows per body: {sizes})")
        axes.legend()

    return draw


def measure(
    routers: dict[str, RouterProcess], kind: str, bodies: list[bytes], rows: int
) -> dict[str, Any]:
    """Each body to each router in turn (the order alternating), so that both see the same
    machine; per router its bodies' costs and their medians, and for this checkout's router
    the target's verdict (a baseline's figures are context: the targets are this code's)."""
    measured: dict[str, list[dict[str, float]]] = {name: [] for name in routers}
    for number, body in enumerate(bodies):
        names = list(routers)
        for name in names[number % len(names) :] + names[: number % len(names)]:
            router = routers[name]
            pid = router.pid()
            assert pid is not None
            measured[name] += asyncio.run(costs(router.url, pid, kind, [body], rows))
    result: dict[str, Any] = {}
    for name, samples in measured.items():
        median = summary(samples)
        result[name] = {"bodies": samples, "median": median}
        if name == "this":
            result[name]["target"] = verdict(median["router_us"], TARGET_US[kind])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest.cpu")
    parser.add_argument("--bodies", type=int, default=5, help="bodies per kind (medians)")
    parser.add_argument("--rows", type=int, default=100_000, help="rows per body")
    parser.add_argument("--data-dir", type=Path, default=Path("var/bench-cpu"))
    parser.add_argument("--keep", action="store_true", help="keep the cluster's data")
    parser.add_argument("--name", default="ingest-cpu", help="result file name")
    parser.add_argument(
        "--baseline-commit",
        help="a commit whose router runs beside this one's, body for body (checked out into a "
        "temporary git worktree, recorded by commit): its costs are reported as context",
    )
    parser.add_argument("--kinds", nargs="+", choices=("audit", "flow"), default=["audit", "flow"])
    args = parser.parse_args()
    records = {
        "audit": generate.audit_records(
            args.rows * args.bodies, [f"bench-owner-{i}" for i in range(8)], seed=1
        ),
        "flow": generate.flow_records(
            args.rows * args.bodies, [f"bench-switch-{i}" for i in range(4)], seed=2
        ),
    }
    # Absolute: a baseline router runs in its own checkout's directory.
    settings = bench_settings(args.data_dir.absolute())
    kinds: dict[str, Any] = {}
    try:
        with ExitStack() as stack:
            router = stack.enter_context(bench_cluster(settings))[1]
            assert router is not None
            routers = {"this": router}
            other = (
                None
                if args.baseline_commit is None
                else stack.enter_context(baseline.checkout(args.baseline_commit))
            )
            if other is not None:
                routers["baseline"] = baseline_router(
                    settings, args.data_dir / "baseline", other.code
                )
            try:
                for kind, rows in records.items():
                    if kind not in args.kinds:
                        continue
                    bodies = generate.ndjson_bodies(rows, args.rows)
                    # The first body creates the day tables: a warm-up, not measured.
                    measure(routers, kind, bodies[:1], args.rows)
                    kinds[kind] = measure(routers, kind, bodies, args.rows)
                    if other is not None:
                        # The other checkout by its commit (never a path of this machine).
                        kinds[kind]["baseline"].update(other.record())
                    for name, result in kinds[kind].items():
                        median = result["median"]
                        state = (
                            f"target <= {TARGET_US[kind]}: "
                            + ("met" if result["target"]["met"] else "SHORTFALL")
                            if "target" in result
                            else "context"
                        )
                        print(
                            f"{kind:5} {name:8}: router {median['router_us']:5.2f} us/row "
                            f"({state}; in the kernel "
                            f"{median['router_kernel_us']:4.2f}), the rest (PostgreSQL) "
                            f"{median['rest_us']:5.2f}, client {median['client_us']:5.2f}; "
                            f"{median['rows_per_s']:,.0f} rows/s",
                            flush=True,
                        )
            finally:
                if "baseline" in routers:
                    routers["baseline"].stop()
    finally:
        if not args.keep:
            shutil.rmtree(args.data_dir, ignore_errors=True)
    rows_per_body = dict.fromkeys(kinds, args.rows)
    earlier = RESULTS / f"{args.name}.json"
    if set(args.kinds) != set(TARGET_US) and earlier.exists():
        # A run of some kinds: the stored figures of the others stay, with their own stamp.
        stored = json.loads(earlier.read_text())
        kinds = {**stored.get("kinds", {}), **kinds}
        rows_per_body = {**stored.get("rows_per_body", {}), **rows_per_body}
    payload = {"rows_per_body": rows_per_body, "kinds": kinds}
    parts = {kind: kind in args.kinds for kind in TARGET_US}
    write_results(args.name, payload, plot(payload), mode=mode_of(parser, args), parts=parts)
    return 0 if all(kinds[k]["this"]["target"]["met"] for k in args.kinds) else 1


if __name__ == "__main__":
    raise SystemExit(main())
