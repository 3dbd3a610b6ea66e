"""bench/ingest/small: small requests, as shippers send them (small batches, often), with 8
concurrent clients: single-record audit requests (POST /v1/audit with one record) and 100-row
NDJSON flow requests spanning 4 switches. Each router configuration (``CONFIGS``: the write
path of before issue 20, i.e. one transaction per part with its own round trips, and the
write path of after: a tiny part in one statement, concurrent parts for one shard sharing a
commit) gets its own router on the same cluster, measured in turns within one run; per
configuration: requests/s, p50/p95 latency, and CPU per request split router / PostgreSQL
(/proc/PID/task/*/schedstat of the router and of every shard's postgres processes).

    python -m bench.ingest.small [--repeats 3] [--requests 2000] [--flow-requests 400]
                                 [--baseline-commit SHA | --no-baseline]

The target (single-record audit requests/s: 3x those of before issue 20) compares ``after``
with ``before``: one router, the pre-issue-20 write path switched back on. Beside them, as
context, the router of an older commit (``--baseline-commit``, by default d7a2a22, the one
before issue 20), checked out in a temporary git worktree, takes its turn at its defaults as
configuration ``commit <sha>``: the router as a new user had it; its ratio is recorded with
the commit.

Writes bench/results/ingest-small.{json,png}.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from bench import baseline, harness
from bench.harness import bench_cluster, bench_settings, cpu_seconds, verdict, write_results
from bench.http_client import LeanClient
from bench.ingest import generate
from bench.stamps import mode_of
from services.router_process import RouterProcess

CLIENTS = 8
SWITCHES = 4
FLOW_ROWS = 100
# Single-record audit requests/s with 8 clients: 3x those of the write path before issue 20
# (the "before" configuration) in the same run.
TARGET_AUDIT_SPEEDUP = 3.0
TARGET_FLOW_P50_MS = 10.0
# The router's settings of each configuration (environment of its process).
CONFIGS: dict[str, dict[str, str]] = {
    "before": {
        "SHARDLOG_INGEST__GROUP_COMMIT": "false",
        "SHARDLOG_INGEST__ONE_STATEMENT_ROWS": "0",
        "SHARDLOG_POOLS__WRITER_RESET_QUERY": "true",
    },
    "one-statement": {
        "SHARDLOG_INGEST__GROUP_COMMIT": "false",
        "SHARDLOG_POOLS__WRITER_RESET_QUERY": "true",
    },
    "no-reset": {"SHARDLOG_INGEST__GROUP_COMMIT": "false"},
    "after": {},
    # Groups that wait 2 ms to fill: fewer WAL flushes, at up to 2 ms more per request.
    "after-wait-2ms": {"SHARDLOG_INGEST__GROUP_COMMIT_WAIT_MS": "2"},
}


@dataclass
class Load:
    """One workload: the raw requests each client sends in turn."""

    name: str
    path: str
    content_type: str
    bodies: list[bytes]


@dataclass
class Sample:
    seconds: float
    latencies_ms: list[float]
    router_cpu_s: float
    postgres_cpu_s: float
    requests: int

    @property
    def per_s(self) -> float:
        return self.requests / self.seconds


@dataclass
class Measured:
    samples: list[Sample] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        def median(values: list[float]) -> float:
            return statistics.median(values)

        def pct(sample: Sample, q: float) -> float:
            ordered = sorted(sample.latencies_ms)
            return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

        return {
            "requests_per_s": round(median([s.per_s for s in self.samples]), 1),
            "p50_ms": round(median([pct(s, 0.5) for s in self.samples]), 2),
            "p95_ms": round(median([pct(s, 0.95) for s in self.samples]), 2),
            "router_cpu_us_per_request": round(
                median([s.router_cpu_s / s.requests * 1e6 for s in self.samples]), 1
            ),
            "postgres_cpu_us_per_request": round(
                median([s.postgres_cpu_s / s.requests * 1e6 for s in self.samples]), 1
            ),
            "repeats": [
                {"requests_per_s": round(s.per_s, 1), "p50_ms": round(pct(s, 0.5), 2)}
                for s in self.samples
            ],
        }


def process_tree(roots: set[int]) -> list[int]:
    """``roots`` and every process below them, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def tree_cpu(roots: set[int]) -> dict[int, float]:
    cpu = {}
    for pid in process_tree(roots):
        try:
            cpu[pid] = cpu_seconds(pid)
        except (FileNotFoundError, ProcessLookupError):
            continue
    return cpu


def used(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds between two readings; a process born in between counts from zero."""
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())


def postmasters(cluster: Any) -> set[int]:
    return {
        int(instance.pid_file.read_text().splitlines()[0])
        for instance in cluster.instances.values()
    }


async def run_load(url: str, load: Load, clients: int) -> tuple[float, list[float]]:
    headers = harness.auth_for(url)
    latencies: list[float] = []

    async def client(mine: list[bytes]) -> None:
        lean = LeanClient(url, headers)
        try:
            for body in mine:
                raw = lean.request(load.path, body, load.content_type)
                started = time.perf_counter()
                status, answer = await lean.send(raw)
                latencies.append((time.perf_counter() - started) * 1000)
                if status != 200:
                    raise RuntimeError(f"{load.path}: {status} {answer[:300]!r}")
        finally:
            await lean.close()

    started = time.perf_counter()
    await asyncio.gather(*(client(load.bodies[i::clients]) for i in range(clients)))
    return time.perf_counter() - started, latencies


def measure(url: str, router_pid: int, pg: set[int], load: Load, clients: int) -> Sample:
    router_before, pg_before = tree_cpu({router_pid}), tree_cpu(pg)
    seconds, latencies = asyncio.run(run_load(url, load, clients))
    router_s = used(router_before, tree_cpu({router_pid}))
    pg_s = used(pg_before, tree_cpu(pg))
    return Sample(seconds, latencies, router_s, pg_s, len(load.bodies))


def loads(requests: int, flow_requests: int, seed: int) -> dict[str, Load]:
    owners = [f"small-owner-{n}" for n in range(CLIENTS)]
    audit = generate.audit_records(requests, owners, seed)
    switches = [f"small-switch-{n}" for n in range(SWITCHES)]
    flows = generate.flow_records(flow_requests * FLOW_ROWS, switches, seed)
    return {
        "audit-1-record": Load(
            "audit-1-record",
            "/v1/audit",
            "application/json",
            [orjson.dumps([record]) for record in audit],
        ),
        "flows-100-rows": Load(
            "flows-100-rows",
            "/v1/flows",
            "application/x-ndjson",
            generate.ndjson_bodies(flows, FLOW_ROWS),
        ),
    }


def router_for(settings: Any, config: str, old: baseline.Baseline | None) -> RouterProcess:
    """The router of ``config``; the baseline's label: the router of that commit, at its
    defaults."""
    return RouterProcess(
        settings.cluster.data_dir,
        settings.server.host,
        settings.server.port,
        env={**harness.router_env(settings), **CONFIGS.get(config, {})},
        code=old.code if old is not None and config == old.label else None,
    )


def plot(payload: dict[str, Any]) -> Any:
    def draw(figure: Any) -> None:
        results = payload["results"]
        configs = list(results)
        panels = (
            ("audit-1-record", "requests_per_s", "1-record audit: requests/s"),
            ("flows-100-rows", "p50_ms", "100-row flows: p50 ms"),
            ("audit-1-record", "cpu", "1-record audit: CPU us per request"),
            ("flows-100-rows", "cpu", "100-row flows: CPU us per request"),
        )
        for index, (load, metric, title) in enumerate(panels, start=1):
            axes = figure.add_subplot(2, 2, index)
            if metric == "cpu":
                harness.grouped_bars(
                    axes,
                    configs,
                    {
                        part: [results[c][load][f"{part}_cpu_us_per_request"] for c in configs]
                        for part in ("router", "postgres")
                    },
                )
                axes.legend()
            else:
                axes.bar(configs, [results[c][load][metric] for c in configs])
            axes.set_title(title)

    return draw


def take_turns(
    settings: Any, cluster: Any, configs: list[str], old: baseline.Baseline | None, args: Any
) -> dict[str, dict[str, Measured]]:
    """Every configuration's router, started in turn, runs both loads; the first
    ``args.warm_up_rounds`` rounds warm up (not measured)."""
    token = harness.bench_token(settings)
    pg = postmasters(cluster)
    measured: dict[str, dict[str, Measured]] = {c: {} for c in configs}
    for repeat in range(args.warm_up_rounds + args.repeats):
        work = loads(args.requests, args.flow_requests, seed=repeat)
        for config in configs:
            router = router_for(settings, config, old)
            router.start()
            harness.TOKENS[router.url] = token
            pid = router.pid()
            assert pid is not None
            try:
                for name, load in work.items():
                    sample = measure(router.url, pid, pg, load, args.clients)
                    if repeat < args.warm_up_rounds:
                        continue
                    measured[config].setdefault(name, Measured()).samples.append(sample)
                    print(
                        f"  {config:16} {name:15} {sample.per_s:8,.0f} req/s "
                        f"router {sample.router_cpu_s / sample.requests * 1e6:6.0f} us "
                        f"postgres {sample.postgres_cpu_s / sample.requests * 1e6:6.0f}"
                        " us per request",
                        flush=True,
                    )
            finally:
                router.stop()
    return measured


def audit_ratio(results: dict[str, Any], against: str) -> float:
    """``after``'s single-record audit requests/s over ``against``'s."""
    audit = {
        config: by_load["audit-1-record"]["requests_per_s"] for config, by_load in results.items()
    }
    return round(float(audit["after"]) / float(audit[against]), 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest.small")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--warm-up-rounds", type=int, default=1, help="rounds of every router, not measured"
    )
    parser.add_argument("--requests", type=int, default=2000, help="1-record audit requests")
    parser.add_argument("--flow-requests", type=int, default=400, help="100-row flow requests")
    parser.add_argument("--clients", type=int, default=CLIENTS)
    parser.add_argument("--shards", type=int, default=12)
    parser.add_argument("--base-port", type=int, default=harness.BENCH_BASE_PORT)
    parser.add_argument("--router-port", type=int, default=harness.BENCH_ROUTER_PORT)
    parser.add_argument("--data-dir", type=Path, default=Path("/tmp/shardlog-bench-small"))
    parser.add_argument("--keep", action="store_true", help="keep the cluster's data directory")
    parser.add_argument(
        "--baseline-commit",
        default=baseline.BEFORE_ISSUE_20,
        help="the commit whose router takes its turn at its defaults, as context (default: "
        "%(default)s, the one before issue 20)",
    )
    parser.add_argument("--no-baseline", action="store_true", help="no router of another commit")
    args = parser.parse_args(argv)

    settings = bench_settings(
        args.data_dir,
        shards=args.shards,
        groups=min(2, args.shards),
        base_port=args.base_port,
        router_port=args.router_port,
    )
    with ExitStack() as stack:
        if not args.keep:
            stack.callback(shutil.rmtree, args.data_dir, ignore_errors=True)
        old = (
            None
            if args.no_baseline
            else stack.enter_context(baseline.checkout(args.baseline_commit))
        )
        configs = [*CONFIGS] if old is None else [*CONFIGS, old.label]
        cluster, _ = stack.enter_context(bench_cluster(settings, with_router=False))
        measured = take_turns(settings, cluster, configs, old, args)

    results = {c: {n: m.summary() for n, m in loads_.items()} for c, loads_ in measured.items()}
    flow_p50 = results["after"]["flows-100-rows"]["p50_ms"]
    verdicts = {
        "audit_1_record_vs_before": verdict(
            audit_ratio(results, "before"), TARGET_AUDIT_SPEEDUP, at_most=False
        ),
        "flows_100_rows_p50_ms": verdict(flow_p50, TARGET_FLOW_P50_MS),
    }
    context = None
    if old is not None:
        context = {
            **old.record(),
            "label": old.label,
            "audit_1_record_after_vs_it": audit_ratio(results, old.label),
            "note": f"context, not the target: single-record audit requests/s of 'after' over "
            f"those of the router of {old.label} at its defaults, in turns on the same cluster",
        }
    payload = {
        "params": {
            "clients": args.clients,
            "requests": args.requests,
            "flow_requests": args.flow_requests,
            "flow_rows": FLOW_ROWS,
            "switches": SWITCHES,
            "shards": args.shards,
            "repeats": args.repeats,
            "configs": CONFIGS,
        },
        "machine_note": baseline.MACHINE_NOTE,
        "results": results,
        "baseline": context,
        "verdicts": verdicts,
    }
    json_path, png_path = write_results(
        "ingest-small", payload, plot(payload), mode=mode_of(parser, args)
    )
    print()
    for config, by_load in results.items():
        for name, summary in by_load.items():
            print(
                f"{config:16} {name:15} {summary['requests_per_s']:8,.1f} req/s "
                f"p50 {summary['p50_ms']:6.2f} ms p95 {summary['p95_ms']:6.2f} ms; CPU per "
                f"request: router {summary['router_cpu_us_per_request']:,.0f} us, postgres "
                f"{summary['postgres_cpu_us_per_request']:,.0f} us"
            )
    if context is not None:
        print(
            f"context: 'after' {context['audit_1_record_after_vs_it']}x the single-record "
            f"audit requests/s of the router of {context['label']}"
        )
    for name, outcome in verdicts.items():
        if outcome["met"]:
            print(f"{name}: {outcome['value']} (target {outcome['target']}): met")
        else:
            print(
                f"SHORTFALL {name}: {outcome['value']} where the target is "
                f"{'<=' if outcome['at_most'] else '>='} {outcome['target']}"
            )
    print(f"wrote {json_path} and {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
