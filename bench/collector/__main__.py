"""bench/collector: the highest rate at which shardlog's NetFlow/IPFIX collector and nfcapd
(on the same box, writing files, not a database) drop no flow. A separate sender process
replays pre-built IPFIX (or v9) messages of 30 flows to one target at a time, `--seconds` at
each rate, up a ladder from `--start-rate` (doubling, at most `--max-rate`) until a rate drops
flows, then bisecting; the search runs `--repeats` times per target, the targets alternated.
shardlog keeps a flow when it is committed in the database within `--drain` seconds of the
last send; nfcapd when nfdump finds it in the file. Reports the highest 0-drop rate of each
target (median of the repeats) in flows/s and packets/s, shardlog / nfcapd (target >= 0.5),
CPU per flow of the collector process and of nfcapd, and every step. Then, on the same shards,
the database's own bound (bench/collector/ceiling.py): the pool's flows merged straight from
Python with the write path's SQL in the collector's batches, against 0.5x nfcapd's rate.
Writes bench/results/collector.{json,png}.

    python -m bench.collector [--version ipfix|v9] [--seconds 5] [--repeats 3] [--max-rate N]

Ports: the cluster's and the router's from SHARDLOG_BENCH_BASE_PORT /
SHARDLOG_BENCH_ROUTER_PORT (26432, 8090); the collector's UDP, metrics and nfcapd ports are
`--collector-port` (default: the router's + 20) and the three after it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any

from bench import cluster_run
from bench.collector import ceiling
from bench.collector.pool import FLOWS_PER_MESSAGE, VERSIONS
from bench.collector.rates import RateSearch
from bench.collector.sender import Sender
from bench.collector.targets import NfcapdTarget, ShardlogTarget, Step
from bench.harness import (
    Progress,
    bench_cluster,
    bench_settings,
    router_env,
    verdict,
    write_results,
)
from bench.stamps import mode_of
from router.settings import CollectorSettings
from services.collector_process import CollectorProcess

NAME = "collector"
TARGET = 0.5
Target = ShardlogTarget | NfcapdTarget


def search(target: Target, sender: Sender, args: argparse.Namespace, repeat: int) -> dict[str, Any]:
    """One rate search of ``target``: every step, the highest rate that dropped nothing."""
    rates = RateSearch(args.start_rate, args.max_rate, args.bisections)
    steps: list[Step] = []
    best: Step | None = None
    while (rate := rates.next()) is not None:
        step = target.measure(sender, int(rate), int(rate * args.seconds))
        steps.append(step)
        # A sender short of the rate: what it kept is the rate judged.
        judged = rate if step.reached else step.sent.flows_per_s
        rates.record(judged, step.ok, step.reached)
        if step.ok and judged == rates.best:
            best = step
        summary = step.summary()
        print(
            f"  {target.name} #{repeat + 1} at {int(rate):,} flows/s: sent "
            f"{summary['sent_flows_per_s']:,}/s, stored {step.stored:,}/{step.sent.flows:,}, "
            f"kernel dropped {step.kernel_drops:,} datagrams, others {step.other_drops}, "
            f"{summary['cpu_us_per_flow']} us CPU/flow, machine {summary['machine_cores']} cores"
            + ("" if step.ok else "  DROPS")
            + ("" if step.reached else "  (sender short of the rate)"),
            flush=True,
        )
    return {
        "repeat": repeat + 1,
        "best_flows_per_s": round(rates.best),
        "sender_bound": best is not None and not best.reached,
        "cpu_us_per_flow_at_best": None if best is None else best.summary()["cpu_us_per_flow"],
        "steps": [s.summary() for s in steps],
    }


def summarise(searches: list[dict[str, Any]], most: int) -> dict[str, Any]:
    best = [s["best_flows_per_s"] for s in searches]
    cpu = [s["cpu_us_per_flow_at_best"] for s in searches if s["cpu_us_per_flow_at_best"]]
    median = statistics.median(best)
    return {
        "best_flows_per_s": median,
        "best_packets_per_s": round(median / FLOWS_PER_MESSAGE),
        "best_runs": best,
        "cpu_us_per_flow": round(statistics.median(cpu), 2) if cpu else None,
        "sender_bound": any(s["sender_bound"] for s in searches),
        # The ladder's top passed: the target's rate is at least this, not this.
        "at_max_rate": median >= most,
    }


def collector_env(settings: Any, ports: list[int], home: Path) -> dict[str, str]:
    return {
        **router_env(settings),
        "SHARDLOG_COLLECTOR__NETFLOW_PORT": str(ports[0]),
        "SHARDLOG_COLLECTOR__IPFIX_PORT": str(ports[1]),
        "SHARDLOG_COLLECTOR__METRICS_PORT": str(ports[2]),
        "SHARDLOG_COLLECTOR__STATE_FILE": str(home / "templates.json"),
    }


def searches_of(
    collector: CollectorProcess, router_url: str, args: argparse.Namespace, ports: list[int]
) -> dict[str, list[dict[str, Any]]]:
    """The warm-up, then every search of both targets, the targets alternated."""
    sender = Sender(args.version, -(-args.pool_flows // FLOWS_PER_MESSAGE))
    try:
        udp_port = ports[1] if args.version == "ipfix" else ports[0]
        shardlog = ShardlogTarget(collector, udp_port, router_url, args.drain)
        nfcapd = NfcapdTarget(args.data_dir.absolute() / "nfcapd", ports[3])
        # Warm-up: the switch's owner and day tables exist before the first step.
        warm = shardlog.measure(sender, args.start_rate, args.start_rate)
        print(f"  warm-up: {warm.stored:,}/{warm.sent.flows:,} flows stored", flush=True)
        progress = Progress("searches", 2 * args.repeats, unit="searches", every_s=0)
        searches: dict[str, list[dict[str, Any]]] = {"shardlog": [], "nfcapd": []}
        for repeat in range(args.repeats):
            for target in (shardlog, nfcapd):
                searches[target.name].append(search(target, sender, args, repeat))
                progress.advance()
        return searches
    finally:
        sender.close()


def measure(settings: Any, args: argparse.Namespace) -> dict[str, Any]:
    base = args.collector_port
    ports = [base, base + 1, base + 2, base + 3]
    home = args.data_dir.absolute() / "collector-bench"
    with bench_cluster(settings) as (cluster, router):
        assert router is not None
        env = collector_env(settings, ports, home)
        collector = CollectorProcess(home, "127.0.0.1", ports[2], env)
        collector.start()
        try:
            searches = searches_of(collector, router.url, args, ports)
        finally:
            collector.stop()
        log = collector.log_file.read_text(errors="replace")
        if "Traceback" in log:
            print(f"  WARNING: the collector logged a traceback ({collector.log_file})")
        print("  the database's bound: the pool merged straight from Python ...", flush=True)
        bound = ceiling.measure(
            [shard.spec.dsn() for shard in cluster.shards],
            args.pool_flows,
            CollectorSettings().batch_flows,
        )
    return {"searches": searches, "ceiling": bound, "load_after": os.getloadavg()}


def plot(payload: dict[str, Any]) -> Any:
    def draw(figure: Any) -> None:
        steps_axes, best_axes = figure.subplots(1, 2)
        for name, marker in (("shardlog", "o"), ("nfcapd", "s")):
            steps = [s for run in payload["searches"][name] for s in run["steps"]]
            steps_axes.scatter(
                [s["rate"] for s in steps],
                [s["stored"] / s["sent"] for s in steps],
                marker=marker,
                label=name,
            )
        steps_axes.set_xscale("log")
        steps_axes.set_xlabel("flows/s sent")
        steps_axes.set_ylabel(f"share stored (shardlog: within {payload['params']['drain']} s)")
        steps_axes.set_title("every step")
        steps_axes.legend()
        summary = payload["summary"]
        names = ["shardlog", "nfcapd"]
        heights = [summary[n]["best_flows_per_s"] for n in names]
        names.append("database alone\n(merge, no collector)")
        heights.append(summary["database_ceiling"]["merge_flows_per_s"])
        best_axes.bar(names, heights)
        best_axes.set_yscale("log")
        best_axes.axhline(
            TARGET * summary["nfcapd"]["best_flows_per_s"],
            linestyle="--",
            color="grey",
            label=f"{TARGET}x nfcapd",
        )
        best_axes.set_ylabel("highest rate with 0 drops, flows/s (median)")
        best_axes.set_title(
            f"{payload['params']['version']}, {FLOWS_PER_MESSAGE} flows/packet: "
            f"ratio {summary['ratio']}"
        )
        best_axes.legend()

    return draw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.collector")
    parser.add_argument("--version", choices=VERSIONS, default="ipfix")
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds at each rate")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--start-rate", type=int, default=5_000, help="flows/s")
    parser.add_argument("--max-rate", type=int, default=1_280_000, help="flows/s")
    parser.add_argument("--bisections", type=int, default=2)
    parser.add_argument("--drain", type=float, default=2.0, help="seconds after the last send")
    parser.add_argument("--pool-flows", type=int, default=300_000, help="distinct flows replayed")
    parser.add_argument("--shards", type=int, default=12)
    parser.add_argument("--collector-port", type=int, default=0, help="default: router port + 20")
    cluster_run.add_cluster_flags(parser, "var/bench-collector")
    args = parser.parse_args(argv)
    args.collector_port = args.collector_port or args.router_port + 20
    settings = bench_settings(
        args.data_dir, shards=args.shards, base_port=args.base_port, router_port=args.router_port
    )
    load_before = os.getloadavg()
    try:
        measured = measure(settings, args)
    finally:
        if not args.keep:
            shutil.rmtree(args.data_dir, ignore_errors=True)
    searches = measured["searches"]
    summary: dict[str, Any] = {
        name: summarise(runs, args.max_rate) for name, runs in searches.items()
    }
    reference = summary["nfcapd"]["best_flows_per_s"]
    ratio = round(summary["shardlog"]["best_flows_per_s"] / reference, 3) if reference else 0.0
    summary["ratio"] = ratio
    bound = measured["ceiling"]
    merge_rate = bound["merge_flows_per_s"]
    summary["database_ceiling"] = bound | {
        "shardlog_over_ceiling": round(summary["shardlog"]["best_flows_per_s"] / merge_rate, 3),
        "ceiling_over_nfcapd": round(merge_rate / reference, 3) if reference else None,
        # The target is out of reach of any collector that merges into these shards.
        "target_within_ceiling": merge_rate >= TARGET * reference,
    }
    # No directory of this machine in the result: the data directory is left out.
    params = {k: v for k, v in vars(args).items() if not isinstance(v, Path)}
    payload = {
        "params": params | {"flows_per_packet": FLOWS_PER_MESSAGE},
        "summary": summary,
        "targets": {"shardlog_over_nfcapd": verdict(ratio, TARGET, at_most=False)},
        "load_average": {"before": load_before, "after": measured["load_after"]},
        "rmem_max": int(Path("/proc/sys/net/core/rmem_max").read_text()),
        "searches": searches,
    }
    for name in ("shardlog", "nfcapd"):
        s = summary[name]
        print(
            f"  {name}: {s['best_flows_per_s']:,.0f} flows/s ({s['best_packets_per_s']:,} "
            f"packets/s) with 0 drops (runs {s['best_runs']}), {s['cpu_us_per_flow']} us CPU/flow"
            + ("; the sender could go no faster" if s["sender_bound"] else "")
            + ("; the top of the ladder (--max-rate): at least this" if s["at_max_rate"] else ""),
            flush=True,
        )
    print(f"  shardlog / nfcapd: {ratio} (target >= {TARGET})", flush=True)
    top = summary["database_ceiling"]
    print(
        f"  the database alone (write path's SQL from Python, batches of {top['batch_flows']:,}): "
        f"{top['merge_flows_per_s']:,} flows/s merging (runs {top['merge_flows_per_s_runs']}), "
        f"{top['insert_flows_per_s']:,} inserting; {TARGET}x nfcapd is "
        f"{TARGET * reference:,.0f} flows/s: "
        + ("within" if top["target_within_ceiling"] else "beyond")
        + f" the database's bound; shardlog's collector reaches {top['shardlog_over_ceiling']} "
        "of that bound",
        flush=True,
    )
    if ratio < TARGET:
        print(f"  SHORTFALL: shardlog / nfcapd {ratio} < {TARGET}", flush=True)
    json_path, png_path = write_results(NAME, payload, plot(payload), mode=mode_of(parser, args))
    print(f"  wrote {json_path} and {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
