"""bench/failover: what each fault costs an HA cluster under continuous audit ingest, with the
group's synchronous replication on and off, and what HA costs ingest throughput.

Faults (from services/faults.py, the same the fault tests assert on): kill -9 of a shard's
primary, a whole shard stopped, etcd stopped beyond the ttl, HAProxy stopped. Each is run
``--runs`` times per replication setting while two clients post 200-row audit batches without
retries of their own; measured: recovery time, the clients' longest wait between two
acknowledgments, client errors, acknowledged rows missing afterwards and rows stored twice.

Throughput: the HA topology (4 shards x primary + replica) and the plain one (4 shards) run
side by side; the same NDJSON load is posted to each in alternation, audit with synchronous
replication on and off, and flows.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from bench.harness import (
    BENCH_BASE_PORT,
    BENCH_ROUTER_PORT,
    RESULTS,
    auth_for,
    bench_cluster,
    bench_settings,
    redraw,
    send,
    verdict,
    write_results,
)
from bench.ingest import generate
from bench.load import FlowLoad, IngestLoad, auth_of
from bench.stamps import mode_of
from services import faults
from services.ha_cluster import HaCluster

SHARDS = 4
GROUP = "group1"
FAILOVER_WAIT_S = 90.0
HA_PORT_OFFSET = 1000  # the HA cluster's ports start this far above the plain one's
FAULTS: dict[str, str] = {
    "primary_killed": "kill -9 primary",
    "whole_shard_stopped": "whole shard stopped",
    "etcd_stopped": "etcd stopped 25 s",
    "haproxy_stopped": "HAProxy stopped",
}


def set_synchronous(api: httpx.Client, on: bool) -> None:
    response = api.put(f"/v1/admin/groups/{GROUP}/replication", json={"synchronous": on})
    response.raise_for_status()
    time.sleep(1.0)  # the router picks catalog changes up by NOTIFY


def settle(cluster: HaCluster) -> None:
    for spec in cluster.topology.shards:
        faults.rejoin(cluster, spec.name)


def one_fault(cluster: HaCluster, api: httpx.Client, fault: str) -> dict[str, Any]:
    settle(cluster)
    target = cluster.topology.shards[0].name
    flows = FlowLoad(str(api.base_url), auth_of(api))
    with IngestLoad(str(api.base_url), auth_of(api)) as load, flows:
        load.wait_for_batches(6)
        if fault == "primary_killed":
            _, recovery = faults.primary_killed(cluster, target)
        elif fault == "whole_shard_stopped":
            recovery = faults.whole_shard_stopped(cluster, target, load)
        elif fault == "etcd_stopped":
            recovery = faults.etcd_stopped(cluster, load)
        else:
            recovery = faults.haproxy_stopped(cluster, load)
        load.wait_for_batches(len(load.outcomes) + 4)
    settle(cluster)  # a killed primary rejoins (rewound) before the rows are counted
    tally = load.tally(api)
    flow_tally = flows.tally(api)
    return {
        "fault": fault,
        "recovery_s": round(recovery, 2),
        "longest_stall_s": round(load.longest_stall(), 2),
        "slowest_batch_s": round(max(o.seconds for o in load.outcomes), 2),
        "batches": len(load.outcomes),
        "acknowledged_rows": len(load.acknowledged()),
        "client_errors": len(load.errors),
        "rows_lost": len(tally.missing),
        "rows_duplicated": len(tally.duplicated),
        "flow_longest_stall_s": round(flows.longest_stall(), 2),
        "flow_batches": len(flows.outcomes),
        "flow_client_errors": flows.errors,
        "error_statuses": sorted(
            {o.status for o in load.errors} | {st for st, _ in flows.outcomes if st != 200}
        ),
        "flows_lost": len(flow_tally.missing),
        "flows_duplicated": len(flow_tally.duplicated),
    }


def fault_runs(cluster: HaCluster, api: httpx.Client, runs: int) -> list[dict[str, Any]]:
    samples = []
    for synchronous in (True, False):
        set_synchronous(api, synchronous)
        for run in range(runs):
            for fault in FAULTS:
                sample = {"synchronous": synchronous, "run": run, **one_fault(cluster, api, fault)}
                setting = "on " if synchronous else "off"
                print(f"  sync={setting} run {run + 1} {fault:20} {describe(sample)}", flush=True)
                samples.append(sample)
    set_synchronous(api, True)
    return samples


MEDIANS = ("recovery_s", "longest_stall_s", "flow_longest_stall_s")
SUMS = (
    "client_errors",
    "rows_lost",
    "rows_duplicated",
    "flow_client_errors",
    "flows_lost",
    "flows_duplicated",
)


def summarize_faults(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per fault and setting: medians of the times over the runs, sums of the counts."""
    rows = []
    for synchronous in (True, False):
        for fault in FAULTS:
            mine = [s for s in samples if s["fault"] == fault and s["synchronous"] is synchronous]
            row: dict[str, Any] = {"fault": fault, "synchronous": synchronous, "runs": len(mine)}
            for key in MEDIANS:
                row[f"{key}_median"] = round(statistics.median(s[key] for s in mine), 2)
            for key in SUMS:
                row[key] = sum(s[key] for s in mine)
            rows.append(row)
    return rows


def describe(row: dict[str, Any]) -> str:
    stall = row.get("longest_stall_s_median", row.get("longest_stall_s"))
    flow_stall = row.get("flow_longest_stall_s_median", row.get("flow_longest_stall_s"))
    recovery = row.get("recovery_s_median", row.get("recovery_s"))
    return (
        f"recovery {recovery:6.2f} s | audit: stall {stall:5.2f} s,"
        f" errors {row['client_errors']}, lost {row['rows_lost']}, twice {row['rows_duplicated']}"
        f" | flows: stall {flow_stall:5.2f} s, errors {row['flow_client_errors']},"
        f" lost {row['flows_lost']}, twice {row['flows_duplicated']}"
    )


def throughput(
    plain_url: str, ha_url: str, ha_api: httpx.Client, rounds: int, rows: int
) -> dict[str, Any]:
    """Rows/s of the same loads, alternating between the clusters, ``rounds`` times."""
    owners = [f"failover-bench-{i}" for i in range(4)]
    audit = generate.ndjson_bodies(generate.audit_records(rows, owners, seed=11), 10_000)
    switches = [f"failover-switch-{i}" for i in range(2)]

    def flows(seed: int) -> list[bytes]:  # new flows every run: repeats would only merge
        return generate.ndjson_bodies(generate.flow_records(rows // 2, switches, seed), 10_000)

    configs: dict[str, tuple[str, str, bool | None]] = {
        "plain audit": (plain_url, "/v1/audit", None),
        "HA audit, synchronous": (ha_url, "/v1/audit", True),
        "HA audit, asynchronous": (ha_url, "/v1/audit", False),
        "plain flows": (plain_url, "/v1/flows", None),
        "HA flows (asynchronous, the default)": (ha_url, "/v1/flows", None),
    }
    seconds: dict[str, list[float]] = {name: [] for name in configs}
    for round_ in range(rounds + 1):  # round 0 warms up and is not kept
        for name, (url, path, synchronous) in configs.items():
            if path == "/v1/audit" and url == ha_url:
                set_synchronous(ha_api, bool(synchronous))
            bodies = audit if path == "/v1/audit" else flows(100 + round_ * 10 + len(name))
            started = time.perf_counter()
            asyncio.run(send(url, path, bodies, 4))
            elapsed = time.perf_counter() - started
            if round_:
                seconds[name].append(elapsed)
                count = rows if path == "/v1/audit" else rows // 2
                print(f"  {name:38} {count / elapsed:9,.0f} rows/s", flush=True)
    set_synchronous(ha_api, True)
    result: dict[str, Any] = {}
    for name, (_, path, _) in configs.items():
        count = rows if path == "/v1/audit" else rows // 2
        result[name] = {
            "rows": count,
            "seconds": [round(s, 3) for s in seconds[name]],
            "rows_per_s": round(count / statistics.median(seconds[name])),
        }
    for kind, plain in (("audit", "plain audit"), ("flows", "plain flows")):
        for name in configs:
            if name.startswith("HA") and kind in name:
                result[name]["vs_plain"] = round(
                    result[name]["rows_per_s"] / result[plain]["rows_per_s"], 2
                )
    return result


def _rows(payload: dict[str, Any], synchronous: bool) -> list[dict[str, Any]]:
    return [
        next(r for r in payload["faults"] if r["fault"] == f and r["synchronous"] is synchronous)
        for f in FAULTS
    ]


def plot(payload: dict[str, Any]) -> Callable[[Any], None]:
    def draw(figure: Any) -> None:
        recovery, stalls, speed = figure.subplots(1, 3, gridspec_kw={"width_ratios": [3, 3, 2.5]})
        names = list(FAULTS)
        labels = ["kill -9\nprimary", "whole shard\nstopped", "etcd\nstopped", "HAProxy\nstopped"]
        for offset, synchronous in ((-0.2, True), (0.2, False)):
            rows = _rows(payload, synchronous)
            label = "synchronous" if synchronous else "asynchronous"
            xs = [i + offset for i in range(len(names))]
            recovery.bar(xs, [r["recovery_s_median"] for r in rows], width=0.35, label=label)
            for sample in payload["samples"]:
                if sample["synchronous"] is synchronous:
                    x = names.index(sample["fault"]) + offset
                    recovery.plot(x, sample["recovery_s"], "k.", markersize=4)
            for kind, key, marker in (
                ("audit", "longest_stall_s_median", "o"),
                ("flows", "flow_longest_stall_s_median", "s"),
            ):
                stalls.plot(
                    xs, [r[key] for r in rows], marker, linestyle="", label=f"{kind}, {label}"
                )
        recovery.set_xticks(range(len(names)), labels, fontsize=8)
        recovery.set_ylabel("s (median of runs; dots: each run)")
        lost = sum(r["rows_lost"] + r["flows_lost"] for r in payload["faults"])
        recovery.set_title(f"recovery time (rows lost in all runs: {lost})")
        recovery.legend(fontsize=8)
        stalls.set_xticks(range(len(names)), labels, fontsize=8)
        stalls.set_ylabel("s (median of runs)")
        stalls.set_title("clients' longest wait between acknowledgments")
        stalls.legend(fontsize=7)
        speeds = payload["throughput"]
        short = [
            n.replace(" (asynchronous, the default)", "").replace("ynchronous", "ync")
            for n in speeds
        ]
        speed.barh(short, [v["rows_per_s"] for v in speeds.values()])
        speed.set_xlabel("rows/s (median)")
        speed.set_title(f"ingest, {payload['shards']} shards")
        speed.tick_params(axis="y", labelsize=8)
        speed.invert_yaxis()

    return draw


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.failover")
    parser.add_argument("--runs", type=int, default=3, help="runs of each fault per setting")
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds")
    parser.add_argument("--rows", type=int, default=80_000, help="audit rows per throughput run")
    parser.add_argument("--data-dir", type=Path, default=Path("var/bench-failover"))
    parser.add_argument(
        "--skip-throughput",
        action="store_true",
        help="the faults alone: the stored throughput figures stay, with their own stamp",
    )
    parser.add_argument(
        "--replot", action="store_true", help="redraw the PNG from bench/results/failover.json"
    )
    args = parser.parse_args()
    if args.replot:
        redraw("failover", plot)
        return 0
    plain = bench_settings(args.data_dir / "plain", SHARDS, 1)
    ha = bench_settings(
        args.data_dir / "ha",
        SHARDS,
        1,
        ha=True,
        base_port=BENCH_BASE_PORT + HA_PORT_OFFSET,
        router_port=BENCH_ROUTER_PORT + 1,
    )
    wait = {"SHARDLOG_INGEST__FAILOVER_WAIT_S": str(FAILOVER_WAIT_S)}
    with bench_cluster(ha, router_extra_env=wait) as (ha_cluster, ha_router):
        assert ha_router is not None
        with httpx.Client(
            base_url=ha_router.url, timeout=120, headers=auth_for(ha_router.url)
        ) as ha_api:
            speeds: dict[str, Any] = {}
            if not args.skip_throughput:
                with bench_cluster(plain) as (_, plain_router):
                    assert plain_router is not None
                    print("throughput, HA vs plain", flush=True)
                    speeds = throughput(
                        plain_router.url, ha_router.url, ha_api, args.rounds, args.rows
                    )
            print("faults", flush=True)
            samples = fault_runs(ha_cluster, ha_api, args.runs)
    summary = summarize_faults(samples)
    lost_sync = sum(r["rows_lost"] + r["flows_lost"] for r in summary if r["synchronous"])
    twice = sum(r["rows_duplicated"] + r["flows_duplicated"] for r in summary)
    audit_errors = sum(r["client_errors"] for r in summary)
    payload = {
        "shards": SHARDS,
        "nodes_per_shard": 2,
        "runs": args.runs,
        "faults": summary,
        "samples": samples,
        "throughput": speeds,
        "targets": {
            "rows_lost_synchronous": verdict(lost_sync, 0),
            "rows_duplicated": verdict(twice, 0),
            "audit_client_errors": verdict(audit_errors, 0),
        },
    }
    stored = RESULTS / "failover.json"
    if args.skip_throughput and stored.exists():
        payload["throughput"] = json.loads(stored.read_text()).get("throughput", {})
    json_path, png_path = write_results(
        "failover",
        payload,
        plot(payload),
        mode=mode_of(parser, args),
        parts={"faults": True, "throughput": not args.skip_throughput},
    )
    for row in summary:
        setting = "on " if row["synchronous"] else "off"
        print(f"{row['fault']:20} sync={setting} {describe(row)}")
    for name, figures in speeds.items():
        ratio = f"  ({figures['vs_plain']:.2f} x plain)" if "vs_plain" in figures else ""
        print(f"{name:38} {figures['rows_per_s']:9,} rows/s{ratio}")
    print(f"wrote {json_path} and {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
