"""bench/tail: live tail under load on the default 12-shard local cluster. REST audit ingest
runs alone (its solo rate), then paced at half that rate without subscribers and with
SUBSCRIBERS tail streams open on the same router (various filters, read by separate client
processes). Measured side by side in one run: the paced ingest rate with and without
subscribers, commit-to-delivery latency (the router's histogram: from the start of a row's
writing transaction on its shard to its send; and the client's: from the write's
acknowledgement to the row's arrival), rows delivered, and the router's RSS per subscriber.
Writes bench/results/tail.{json,png}.

    python -m bench.tail [--subscribers 1000] [--seconds 20] [--watermark 0.1] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.harness import (
    auth_for,
    bench_cluster,
    bench_settings,
    cpu_seconds,
    machine_busy_seconds,
    scratch_dir,
    verdict,
    write_results,
)
from bench.stamps import mode_of
from bench.tail.subscribers import OWNERS, owner, subscribers_process
from router import clock

TARGETS = {"p50_s": 0.2, "p99_s": 1.0, "ingest_kept": 0.9}
BATCH = 500


def body(rows: int, rng_seed: int) -> bytes:
    now = clock.now().isoformat()
    lines = []
    for n in range(rows):
        # A few owners per request, as a shipper batching one host's lines would send.
        k = (rng_seed * 7919 + n // 100) % OWNERS
        verb = "denied" if n % 10 == 0 else "allowed"
        lines.append(
            orjson.dumps({"owner": owner(k), "ts": now, "content": f"user{n % 97} {verb} x{n}"})
        )
    return b"\n".join(lines) + b"\n"


async def ingest(url: str, seconds: float, rate: float | None, clients: int) -> dict[str, Any]:
    """REST audit writes of BATCH rows for ``seconds``: as fast as ``clients`` go, or paced at
    ``rate`` rows/s. Rows acknowledged per second and the acknowledgement times."""
    acked = 0
    acks: list[tuple[float, int]] = []
    deadline = time.monotonic() + seconds
    started = time.monotonic()
    interval = None if rate is None else BATCH * clients / rate

    async def client(index: int) -> None:
        nonlocal acked
        seed = index * 1_000_003
        async with httpx.AsyncClient(base_url=url, timeout=60, headers=auth_for(url)) as http:
            next_at = time.monotonic()
            while time.monotonic() < deadline:
                seed += 1
                response = await http.post(
                    "/v1/audit",
                    content=body(BATCH, seed),
                    headers={"content-type": "application/x-ndjson"},
                )
                if response.status_code != 200:
                    raise RuntimeError(f"ingest: {response.status_code} {response.text[:200]}")
                acked += BATCH
                acks.append((time.monotonic(), BATCH))
                if interval is not None:
                    next_at += interval
                    await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    await asyncio.gather(*(client(i) for i in range(clients)))
    elapsed = time.monotonic() - started
    return {"rows": acked, "seconds": round(elapsed, 2), "rows_per_s": round(acked / elapsed)}


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (a router's worker processes)."""
    found = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        for child in children:
            found.extend(process_tree(int(child)))
    return found


def router_rss_mb(pid: int) -> float:
    total = 0.0
    for member in process_tree(pid):
        for line in Path(f"/proc/{member}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) / 1024
    return total


@contextmanager
def cpu_shares(pids: dict[str, list[int]]) -> Iterator[dict[str, float]]:
    """Cores each process kept busy on average while the block ran, the machine's total, and
    the rest (the shards and anything else running here)."""
    shares: dict[str, float] = {}
    started = time.monotonic()
    before = {name: sum(map(cpu_seconds, members)) for name, members in pids.items()}
    busy = machine_busy_seconds()
    yield shares
    elapsed = time.monotonic() - started
    for name, members in pids.items():
        shares[name] = round((sum(map(cpu_seconds, members)) - before[name]) / elapsed, 3)
    shares["machine"] = round((machine_busy_seconds() - busy) / elapsed, 3)
    shares["rest (shards, others)"] = round(
        shares["machine"] - sum(v for k, v in shares.items() if k != "machine"), 3
    )


def lag_quantiles(url: str) -> dict[str, float]:
    """p50 and p99 of the router's delivery-lag histogram (linear within buckets)."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    buckets = []
    for line in text.splitlines():
        if line.startswith("shardlog_tail_delivery_lag_seconds_bucket"):
            bound = line.split('le="')[1].split('"')[0]
            buckets.append(
                (float("inf") if bound == "+Inf" else float(bound), float(line.split()[-1]))
            )
    total = buckets[-1][1] if buckets else 0.0

    def quantile(q: float) -> float:
        target, low, below = q * total, 0.0, 0.0
        for bound, count in buckets:
            if count >= target:
                if bound == float("inf"):
                    return low
                share = (target - below) / max(count - below, 1.0)
                return low + (bound - low) * share
            low, below = bound, count
        return low

    return {"p50_s": round(quantile(0.5), 3), "p99_s": round(quantile(0.99), 3), "rows": total}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tail")
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--watermark", type=float, default=0.1)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument(
        "--workers", type=int, default=1, help="router worker processes (SHARDLOG_SERVER__WORKERS)"
    )
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.subscribers, args.seconds = 100, 8.0
    data_dir = scratch_dir("shardlog-bench-tail-")
    settings = bench_settings(data_dir)
    env = {
        "SHARDLOG_TAIL__WATERMARK_S": str(args.watermark),
        "SHARDLOG_RETENTION__ENABLED": "false",
        "SHARDLOG_SERVER__MAX_CONNECTIONS": str(args.subscribers + 256),
        "SHARDLOG_SERVER__WORKERS": str(args.workers),
    }
    with bench_cluster(settings, router_extra_env=env) as (_cluster, router):
        assert router is not None
        url = router.url
        pid = router.pid()
        assert pid is not None
        print("warm-up (owners and day tables)", flush=True)
        asyncio.run(ingest(url, 4, None, args.clients))
        solo = asyncio.run(ingest(url, args.seconds, None, args.clients))
        print(f"  solo ingest: {solo['rows_per_s']:,} rows/s", flush=True)
        half = solo["rows_per_s"] / 2
        router_pids = process_tree(pid)
        with cpu_shares({"router": router_pids, "bench client": [os.getpid()]}) as alone_cpu:
            alone = asyncio.run(ingest(url, args.seconds, half, args.clients))
        print(f"  paced at {half:,.0f}, no subscribers: {alone['rows_per_s']:,} rows/s", flush=True)
        rss_before = router_rss_mb(pid)
        header = auth_for(url)["Authorization"]
        context = multiprocessing.get_context("spawn")
        stop, out = context.Event(), context.Queue()
        readies, processes = [], []
        for p in range(args.processes):
            ready = context.Event()
            indexes = list(range(p, args.subscribers, args.processes))
            process = context.Process(
                target=subscribers_process, args=(url, header, indexes, ready, stop, out)
            )
            process.start()
            readies.append(ready)
            processes.append(process)
        for ready in readies:
            if not ready.wait(120):
                raise RuntimeError("the subscribers did not all subscribe within 120 s")
        time.sleep(2)
        rss_subscribed = router_rss_mb(pid)
        print(f"  {args.subscribers} subscribed: RSS {rss_before:.0f} -> {rss_subscribed:.0f} MB")
        watched_pids = {"router": router_pids, "bench client": [os.getpid()]}
        for n, process in enumerate(processes):
            watched_pids[f"subscribers {n + 1}"] = [process.pid or 0]
        with cpu_shares(watched_pids) as watched_cpu:
            watched = asyncio.run(ingest(url, args.seconds, half, args.clients))
        time.sleep(args.watermark + 2)
        rss_loaded = router_rss_mb(pid)
        stop.set()
        received = [out.get(timeout=60) for _ in processes]
        for process in processes:
            process.join(timeout=30)
        lags = sorted(lag for r in received for lag in r["lags"])
        delivered = sum(r["rows"] for r in received)
        server = lag_quantiles(url)
    kept = watched["rows_per_s"] / alone["rows_per_s"]
    client = {
        "p50_s": round(statistics.median(lags), 3) if lags else None,
        "p99_s": round(lags[int(len(lags) * 0.99)], 3) if lags else None,
        "sampled": len(lags),
    }
    per_subscriber_kb = (rss_subscribed - rss_before) * 1024 / max(args.subscribers, 1)
    # Each worker keeps its own /metrics, and a scrape reaches one of them: with several, the
    # clients' figure (from the row's ts, set before its write was sent: an upper bound of
    # commit-to-delivery) is the one judged.
    judged: dict[str, Any] = server if args.workers == 1 or not lags else client
    payload = {
        "params": vars(args) | {"owners": OWNERS, "batch": BATCH},
        "targets": {
            "p50_s": verdict(judged["p50_s"], TARGETS["p50_s"]),
            "p99_s": verdict(judged["p99_s"], TARGETS["p99_s"]),
            "ingest_kept": verdict(round(kept, 3), TARGETS["ingest_kept"], at_most=False),
        },
        "solo": solo,
        "paced_alone": alone,
        "paced_with_subscribers": watched,
        "ingest_kept": round(kept, 3),
        "rows_delivered": delivered,
        "latency_judged": "router" if judged is server else "client_ts_to_arrival",
        "latency_router": server,
        "latency_client_ts_to_arrival": client,
        "router_rss_mb": {
            "before": round(rss_before, 1),
            "subscribed": round(rss_subscribed, 1),
            "under_load": round(rss_loaded, 1),
            "per_subscriber_kb": round(per_subscriber_kb, 1),
        },
        "cpu_cores_busy": {"paced_alone": alone_cpu, "paced_with_subscribers": watched_cpu},
        "run": str(uuid.uuid4()),
    }
    print(
        f"  with subscribers: {watched['rows_per_s']:,} rows/s ({kept:.2f}x of alone; target "
        f">= {TARGETS['ingest_kept']}), {delivered:,} rows delivered\n"
        f"  commit-to-delivery (router): p50 {server['p50_s']} s p99 {server['p99_s']} s "
        f"(targets {TARGETS['p50_s']} / {TARGETS['p99_s']}); client ts-to-arrival p50 "
        f"{client['p50_s']} s p99 {client['p99_s']} s\n"
        f"  RSS per subscriber: {per_subscriber_kb:.0f} KB\n"
        f"  cores busy, alone: {alone_cpu}\n  cores busy, with subscribers: {watched_cpu}",
        flush=True,
    )
    for name, target in payload["targets"].items():
        if not target["met"]:
            print(
                f"  SHORTFALL: {name} {target['value']} misses its target {target['target']}",
                flush=True,
            )

    def plot(figure: Any) -> None:
        left, right = figure.subplots(1, 2)
        left.bar(
            ["solo", "paced, alone", f"paced, {args.subscribers} subs"],
            [solo["rows_per_s"], alone["rows_per_s"], watched["rows_per_s"]],
        )
        left.set_ylabel("audit rows/s acknowledged")
        left.set_title("REST ingest")
        right.bar(["p50", "p99"], [server["p50_s"], server["p99_s"]], label="router")
        right.axhline(TARGETS["p50_s"], linestyle="--", color="grey")
        right.axhline(TARGETS["p99_s"], linestyle=":", color="grey")
        right.set_ylabel("seconds")
        right.set_title(f"commit to delivery (watermark {args.watermark} s)")

    paths = write_results("tail", payload, plot, mode=mode_of(parser, args))
    print(f"  wrote {paths[0]} and {paths[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
