"""bench/tail.writes: do live-tail subscribers slow the writes of the owner they follow
(issue 35, item 10)? One router; 50-row REST audit writes to one owner, paced at --rate,
first with no subscriber, then with SUBSCRIBERS tail streams of that owner open (raw sockets
in processes of their own), side by side in one run. Measured: write latency p50/p99 in both
phases (target: p99 with the subscribers at most twice p99 without), the router's RSS before
subscribing, subscribed, under the writes and after the streams closed, the share of rows the
streams had received 3 s after the last write and when they had all (or were cut: overflows).
Writes bench/results/tail-writes.{json,png}.

    python -m bench.tail.writes [--subscribers 1000] [--writes 60] [--rate 2] [--repeats 3]
        [--quick]

Each of --repeats rounds writes to an owner of its own, alone and then with its streams; the
round with the median p99 ratio is reported, every round's ratio beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import sys
import time
import uuid
from datetime import timedelta
from typing import Any

import httpx
import orjson

from bench.harness import (
    auth_for,
    bench_cluster,
    bench_settings,
    scratch_dir,
    verdict,
    write_results,
)
from bench.stamps import mode_of
from bench.tail.__main__ import lag_quantiles, router_rss_mb
from bench.tail.subscribers import one_owner_process
from router import clock

ROWS = 50
TARGET_P99_RATIO = 2.0
# Ports of its own (below 32768): other benchmarks may run beside it.
BASE_PORT, ROUTER_PORT = 27340, 27330


def body(owner: str, tag: str) -> bytes:
    at = clock.now()
    return b"".join(
        orjson.dumps(
            {
                "owner": owner,
                "ts": (at + timedelta(microseconds=n)).isoformat(),
                "content": f"{tag} user{n % 97} {'denied' if n % 10 == 0 else 'allowed'} x{n}",
            }
        )
        + b"\n"
        for n in range(ROWS)
    )


async def paced_writes(url: str, owner: str, writes: int, rate: float, tag: str) -> list[float]:
    """``writes`` writes of ROWS rows, one every 1/``rate`` s (or as soon as the previous one
    is acknowledged, when it took longer): each one's latency."""
    took = []
    async with httpx.AsyncClient(base_url=url, timeout=120, headers=auth_for(url)) as http:
        next_at = time.monotonic()
        for n in range(writes):
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            next_at += 1 / rate
            started = time.perf_counter()
            response = await http.post(
                "/v1/audit",
                content=body(owner, f"{tag}{n}"),
                headers={"content-type": "application/x-ndjson"},
            )
            took.append(time.perf_counter() - started)
            if response.status_code != 200:
                raise RuntimeError(f"write: {response.status_code} {response.text[:200]}")
    return took


def quantiles(took: list[float]) -> dict[str, float]:
    ordered = sorted(took)
    return {
        "p50_s": round(statistics.median(ordered), 4),
        "p99_s": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 4),
        "max_s": round(ordered[-1], 4),
        "writes": len(ordered),
    }


def metric(url: str, name: str) -> float:
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def until(check: Any, deadline_s: float, interval: float = 0.1) -> float | None:
    """Seconds until ``check()`` held, or None past ``deadline_s``."""
    started = time.monotonic()
    while time.monotonic() - started < deadline_s:
        if check():
            return round(time.monotonic() - started, 2)
        time.sleep(interval)
    return None


class Subscribers:
    """SUBSCRIBERS streams of one owner, over ``processes`` processes; ``rows()`` received."""

    def __init__(self, url: str, owner: str, count: int, processes: int) -> None:
        context = multiprocessing.get_context("spawn")
        header = auth_for(url)["Authorization"]
        self.stop = context.Event()
        self.counters = [context.Value("q", 0, lock=False) for _ in range(processes)]
        self.readies = [context.Event() for _ in range(processes)]
        self.processes = [
            context.Process(
                target=one_owner_process,
                args=(url, header, owner, count // processes + (p < count % processes)),
                kwargs={"ready": ready, "stop": self.stop, "rows": counter},
            )
            for p, (ready, counter) in enumerate(zip(self.readies, self.counters, strict=True))
        ]

    def start(self, deadline_s: float) -> None:
        for process in self.processes:
            process.start()
        for ready in self.readies:
            if not ready.wait(deadline_s):
                raise RuntimeError(f"the subscribers did not all subscribe within {deadline_s} s")

    def rows(self) -> int:
        return sum(int(counter.value) for counter in self.counters)

    def close(self) -> None:
        self.stop.set()
        for process in self.processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()


def one_round(args: argparse.Namespace, url: str, pid: int, number: int) -> dict[str, Any]:
    """Writes with no subscriber, then with SUBSCRIBERS streams of a new owner, side by side."""
    owner = f"tail-writes-{uuid.uuid4().hex[:8]}"
    print(f"round {number + 1}: warm-up; then {args.writes} writes of {ROWS} rows", flush=True)
    asyncio.run(paced_writes(url, owner, 10, args.rate * 4, "warm-up"))
    alone = quantiles(asyncio.run(paced_writes(url, owner, args.writes, args.rate, "a")))
    print(f"  no subscriber: p50 {alone['p50_s']} s, p99 {alone['p99_s']} s", flush=True)
    rss = {"before": router_rss_mb(pid)}
    subscribers = Subscribers(url, owner, args.subscribers, args.processes)
    subscribers.start(180)
    rss["subscribed"] = router_rss_mb(pid)
    overflows_before = metric(url, "shardlog_tail_overflows_total")
    watched = quantiles(asyncio.run(paced_writes(url, owner, args.writes, args.rate, "w")))
    last_ack = time.monotonic()
    rss["under_writes"] = router_rss_mb(pid)
    expected = args.writes * ROWS * args.subscribers
    time.sleep(max(0.0, last_ack + 3 - time.monotonic()))
    at_3s = subscribers.rows() / expected
    overflows = metric(url, "shardlog_tail_overflows_total") - overflows_before
    # Streams cut for falling behind receive no more: all rows, or all but theirs.
    drained_s = until(lambda: subscribers.rows() >= expected, 60)
    delivered = subscribers.rows() / expected
    lag = lag_quantiles(url)
    subscribers.close()
    closed_s = until(lambda: metric(url, "shardlog_tail_subscribers") == 0, 60)
    time.sleep(3)  # the router gives memory back a second after its last stream
    rss["closed"] = router_rss_mb(pid)
    ratio = watched["p99_s"] / alone["p99_s"]
    print(f"  {args.subscribers} subscribers: p99 {watched['p99_s']} s ({ratio:.2f}x)", flush=True)
    return {
        "alone": alone,
        "watched": watched,
        "rss": rss,
        "at_3s": at_3s,
        "delivered": delivered,
        "drained_s": drained_s,
        "overflows": overflows,
        "closed_s": closed_s,
        "lag": lag,
        "ratio": ratio,
    }


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tail.writes")
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--writes", type=int, default=60, help="writes per phase")
    parser.add_argument("--rate", type=float, default=2.0, help="writes per second")
    parser.add_argument("--shards", type=int, default=12)
    parser.add_argument("--processes", type=int, default=2, help="subscriber processes")
    parser.add_argument("--repeats", type=int, default=3, help="rounds; the median reported")
    parser.add_argument("--quick", action="store_true", help="4 shards, 20 writes per phase")
    args = parser.parse_args()
    if args.quick:
        args.shards, args.writes = 4, 20
    mode = "quick" if args.quick else "full"
    data_dir = scratch_dir("shardlog-bench-tail-writes-")
    settings = bench_settings(
        data_dir, shards=args.shards, base_port=BASE_PORT, router_port=ROUTER_PORT
    )
    env = {
        "SHARDLOG_RETENTION__ENABLED": "false",
        "SHARDLOG_SERVER__MAX_CONNECTIONS": str(args.subscribers + 256),
    }
    with bench_cluster(settings, router_extra_env=env) as (_cluster, router):
        assert router is not None
        url, pid = router.url, router.pid()
        assert pid is not None
        rounds = [one_round(args, url, pid, n) for n in range(args.repeats)]
    # The round whose p99 ratio is the median is the one reported (its figures belong
    # together); every round's ratio is kept beside it.
    ratios = [r["ratio"] for r in rounds]
    median_round = sorted(rounds, key=lambda r: r["ratio"])[len(rounds) // 2]
    alone, watched, rss = median_round["alone"], median_round["watched"], median_round["rss"]
    at_3s, delivered = median_round["at_3s"], median_round["delivered"]
    drained_s, overflows = median_round["drained_s"], median_round["overflows"]
    closed_s, lag = median_round["closed_s"], median_round["lag"]
    ratio = median_round["ratio"]
    target = verdict(round(ratio, 2), TARGET_P99_RATIO)
    payload = {
        "params": vars(args) | {"rows_per_write": ROWS, "mode": mode},
        "targets": {"write_p99_ratio": target},
        "writes_alone": alone,
        "writes_with_subscribers": watched,
        "write_p99_ratio": round(ratio, 2),
        "write_p99_ratio_each_round": [round(r, 2) for r in ratios],
        "delivered_3s_after_last_write": round(at_3s, 4),
        "delivered": round(delivered, 4),
        "all_delivered_after_s": drained_s,
        "streams_cut_overflow": int(overflows),
        "streams_closed_after_s": closed_s,
        "delivery_lag_router": lag,
        "router_rss_mb": {k: round(v, 1) for k, v in rss.items()},
        "run": str(uuid.uuid4()),
    }
    print(
        f"  {args.subscribers} subscribers: p50 {watched['p50_s']} s, p99 {watched['p99_s']} s "
        f"(p99 {ratio:.2f}x of alone, the median of rounds {[round(r, 2) for r in ratios]}; "
        f"target <= {TARGET_P99_RATIO}x)\n"
        f"  delivered 3 s after the last write: {at_3s:.1%}; in the end {delivered:.1%} "
        f"(after {drained_s} s); streams cut (overflow): {int(overflows)}\n"
        f"  router RSS MB: {payload['router_rss_mb']}",
        flush=True,
    )
    if not target["met"]:
        print(f"  SHORTFALL: write p99 ratio {target['value']} misses {TARGET_P99_RATIO}")

    def plot(figure: Any) -> None:
        left, middle, right = figure.subplots(1, 3)
        labels = ["no subscriber", f"{args.subscribers} subscribers"]
        for offset, name in enumerate(("p50_s", "p99_s")):
            left.bar(
                [n + offset * 0.4 for n in range(2)],
                [alone[name], watched[name]],
                width=0.4,
                label=name[:3],
            )
        left.set_xticks([0.2, 1.2], labels)
        left.axhline(alone["p99_s"] * TARGET_P99_RATIO, linestyle=":", color="grey")
        left.set_ylabel("seconds")
        left.set_title(f"{ROWS}-row write latency at {args.rate}/s (target: p99 line)")
        left.legend()
        middle.bar([name.replace("_", "\n") for name in rss], list(rss.values()))
        middle.set_ylabel("router RSS, MB")
        middle.set_title("router memory")
        right.bar(["3 s after", "in the end"], [at_3s * 100, delivered * 100])
        right.set_ylim(0, 105)
        right.set_ylabel("% of rows x streams received")
        right.set_title(f"delivery ({int(overflows)} streams cut)")
        figure.suptitle(f"bench/tail.writes, {args.shards} shards")

    paths = write_results("tail-writes", payload, plot, mode=mode_of(parser, args))
    print(f"  wrote {paths[0]} and {paths[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
