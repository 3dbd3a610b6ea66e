"""bench/ingest: REST ingest of audit rows and flows on the default 12-shard local cluster,
against raw binary COPY (the limit) and the seed's per-row plpgsql method, side by side in one
run. Prints rows/s and MB/s (medians) and the ratios; writes bench/results/ingest.{json,png}.

    python -m bench.ingest [--repeats 3] [--rows 60000] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from bench.harness import (
    Result,
    bench_cluster,
    bench_settings,
    redraw,
    send,
    timed,
    verdict,
    write_results,
)
from bench.ingest import generate, merge, peers, storage
from bench.stamps import mode_of

BATCHES = (100, 1_000, 10_000, 100_000)
CLIENTS = (1, 2, 4, 8)
TARGETS = {
    "audit_vs_copy": 0.5,
    "audit_vs_seed": 20.0,
    "flows_vs_copy": 0.5,
    "flows_vs_merge_peer": merge.TARGET,
}
SWITCHES = 4


def rest_matrix(
    url: str,
    kind: str,
    records: list[dict[str, Any]],
    base_rows: int,
    batches: tuple[int, ...],
    clients_list: tuple[int, ...],
    repeats: int,
) -> list[Result]:
    path = "/v1/audit" if kind == "audit" else "/v1/flows"
    results = []
    for batch in batches:
        for clients in clients_list:
            # Small batches are slow: a few hundred requests per run measure them well enough.
            count = min(len(records), max(min(base_rows, batch * 200), batch * clients))
            bodies = generate.ndjson_bodies(records[:count], batch)
            size = sum(len(b) for b in bodies)
            result = Result(f"rest-{kind}", {"batch": batch, "clients": clients}, count, size)
            result.seconds = timed(partial(send, url, path, bodies, clients), repeats, warmup=0)
            print(
                f"  REST {kind:5} batch {batch:>6} clients {clients}: "
                f"{result.rows_per_s:>9,.0f} rows/s {result.mb_per_s:7.1f} MB/s",
                flush=True,
            )
            results.append(result)
    return results


def raw_copy(cluster: Any, kind: str, records: list[dict[str, Any]], repeats: int) -> Result:
    rows = peers.audit_tuples(records) if kind == "audit" else peers.int_flow_tuples(records)
    size = sum(len(b) for b in generate.ndjson_bodies(records, 10_000))
    copier = peers.RawCopy(cluster)

    async def run() -> None:
        await copier.copy(rows, kind)

    name = "raw-copy-audit" if kind == "audit" else "raw-copy-int-flows"
    result = Result(name, {}, len(rows), size)
    result.seconds = timed(run, repeats, warmup=1, setup=copier.open, teardown=copier.close)
    print(f"  {name}: {result.rows_per_s:>9,.0f} rows/s {result.mb_per_s:7.1f} MB/s", flush=True)
    return result


def seed(
    cluster: Any, settings: Any, records: list[dict[str, Any]], seconds: int, repeats: int
) -> Result:
    content = records[0]["content"]
    row_bytes = sum(len(b) for b in generate.ndjson_bodies(records[:1000], 1000)) / 1000
    counts = [
        peers.seed_method(cluster, content, seconds, settings.cluster.bin_dir)
        for _ in range(repeats)
    ]
    median_rows = sorted(counts)[len(counts) // 2]
    result = Result(
        "seed-plpgsql",
        {"clients_per_shard": 3, "seconds": seconds},
        median_rows,
        int(median_rows * row_bytes),
        [float(seconds)] * repeats,
    )
    print(
        f"  seed method: {result.rows_per_s:>9,.0f} rows/s {result.mb_per_s:7.1f} MB/s "
        f"(runs: {counts})",
        flush=True,
    )
    return result


def head_to_head(
    url: str,
    cluster: Any,
    kind: str,
    records: list[dict[str, Any]],
    config: dict[str, int],
    pairs: int,
) -> dict[str, Any]:
    """REST (in its best configuration) and raw COPY of the same rows, run alternately, so
    each ratio compares two runs made under the same conditions; the median of the ratios."""
    path = "/v1/audit" if kind == "audit" else "/v1/flows"
    bodies = generate.ndjson_bodies(records, config["batch"])
    rows = peers.audit_tuples(records) if kind == "audit" else peers.int_flow_tuples(records)
    copier = peers.RawCopy(cluster)
    rest_rates, copy_rates = [], []

    async def run() -> None:
        for _ in range(pairs):
            started = time.perf_counter()
            await send(url, path, bodies, config["clients"])
            rest_rates.append(len(records) / (time.perf_counter() - started))
            started = time.perf_counter()
            await copier.copy(rows, kind)
            copy_rates.append(len(records) / (time.perf_counter() - started))

    timed(run, 1, warmup=0, setup=copier.open, teardown=copier.close)
    ratios = [r / c for r, c in zip(rest_rates, copy_rates, strict=True)]
    print(
        f"  head to head {kind}: REST {statistics.median(rest_rates):,.0f} rows/s, raw COPY "
        f"{statistics.median(copy_rates):,.0f} rows/s, ratio median "
        f"{statistics.median(ratios):.3f} of {[round(r, 3) for r in ratios]}",
        flush=True,
    )
    return {
        "config": config,
        "rest_rows_per_s": [round(r) for r in rest_rates],
        "copy_rows_per_s": [round(r) for r in copy_rates],
        "ratios": [round(r, 3) for r in ratios],
        "median_ratio": statistics.median(ratios),
    }


def best(results: list[Result]) -> Result:
    return max(results, key=lambda r: r.rows_per_s)


def plot(results: dict[str, Any]) -> Any:
    def draw(figure: Any) -> None:
        for position, kind in enumerate(("audit", "flow"), start=1):
            axes = figure.add_subplot(1, 2, position)
            rest = [r for r in results["rest"] if r["name"] == f"rest-{kind}"]
            for clients in sorted({r["params"]["clients"] for r in rest}):
                points = sorted(
                    (r["params"]["batch"], r["rows_per_s"])
                    for r in rest
                    if r["params"]["clients"] == clients
                )
                axes.plot(
                    [p[0] for p in points],
                    [p[1] for p in points],
                    marker="o",
                    label=f"REST NDJSON, {clients} client(s)",
                )
            copy = results["raw_copy"][kind]
            axes.axhline(
                copy["rows_per_s"], color="black", linestyle="--", label=f"{copy['name']} (limit)"
            )
            if kind == "audit":
                axes.axhline(
                    results["seed"]["rows_per_s"],
                    color="red",
                    linestyle=":",
                    label="seed: per-row plpgsql (pgbench)",
                )
            axes.set_xscale("log")
            axes.set_xlabel("rows per request")
            axes.set_ylabel("rows/s (median)")
            axes.set_title(f"{kind} ingest, 12 shards, 2 cores (medians)")
            axes.legend(fontsize=7)
            axes.grid(alpha=0.3)

    return draw


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rows", type=int, default=60_000, help="rows per timed run (at least)")
    parser.add_argument("--seed-seconds", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="fewer configurations")
    parser.add_argument("--data-dir", type=Path, default=Path("var/bench"))
    parser.add_argument("--keep", action="store_true", help="keep the benchmark cluster's data")
    parser.add_argument(
        "--replot",
        action="store_true",
        help="redraw the PNG from bench/results/ingest.json, measuring nothing",
    )
    args = parser.parse_args()
    if args.replot:
        redraw("ingest", plot)
        return 0
    batches = (1_000, 10_000) if args.quick else BATCHES
    clients_list = (1, 4) if args.quick else CLIENTS
    settings = bench_settings(args.data_dir)
    most = max(args.rows, max(batches) * max(clients_list))
    audit = generate.audit_records(most, [f"bench-owner-{i}" for i in range(8)], seed=1)
    flows = generate.flow_records(most, [f"bench-switch-{i}" for i in range(SWITCHES)], seed=2)
    try:
        with bench_cluster(settings) as (cluster, router):
            assert router is not None
            print("warm-up", flush=True)
            asyncio.run(
                send(router.url, "/v1/audit", generate.ndjson_bodies(audit[:20_000], 2_000), 4)
            )
            asyncio.run(
                send(router.url, "/v1/flows", generate.ndjson_bodies(flows[:20_000], 2_000), 4)
            )
            print("audit", flush=True)
            rest = rest_matrix(
                router.url, "audit", audit, args.rows, batches, clients_list, args.repeats
            )
            copy_audit = raw_copy(cluster, "audit", audit[: args.rows], args.repeats)
            seed_result = seed(cluster, settings, audit, args.seed_seconds, args.repeats)
            print("flows", flush=True)
            rest += rest_matrix(
                router.url, "flow", flows, args.rows, batches, clients_list, args.repeats
            )
            copy_flows = raw_copy(cluster, "flow", flows[: args.rows], args.repeats)
            print("head to head", flush=True)
            best_audit = best([r for r in rest if r.name == "rest-audit"])
            best_flows = best([r for r in rest if r.name == "rest-flow"])
            duel_audit = head_to_head(
                router.url,
                cluster,
                "audit",
                audit[: args.rows],
                best_audit.params,
                max(args.repeats, 5),
            )
            duel_flows = head_to_head(
                router.url,
                cluster,
                "flow",
                flows[: args.rows],
                best_flows.params,
                max(args.repeats, 5),
            )
            duel_merge = merge.head_to_head(
                router.url,
                cluster,
                flows[: args.rows],
                best_flows.params,
                max(args.repeats, 5),
                SWITCHES,
                settings.cluster.groups,
            )
            sizes = asyncio.run(storage.day_table_sizes(cluster))
    finally:
        if not args.keep:
            shutil.rmtree(args.data_dir, ignore_errors=True)

    ratios = {
        "audit_vs_copy": duel_audit["median_ratio"],
        "audit_vs_seed": statistics.median(duel_audit["rest_rows_per_s"]) / seed_result.rows_per_s,
        "flows_vs_copy": duel_flows["median_ratio"],
        "flows_vs_merge_peer": duel_merge["median_ratio"],
    }
    verdicts = {
        name: verdict(round(value, 3), TARGETS[name], at_most=False)
        for name, value in ratios.items()
    }
    print("\nbest REST audit:", best_audit.params, f"{best_audit.rows_per_s:,.0f} rows/s")
    print("best REST flows:", best_flows.params, f"{best_flows.rows_per_s:,.0f} rows/s")
    for name, judged in verdicts.items():
        below = f"{(1 - judged['value'] / judged['target']) * 100:.0f}% below target"
        state = "met" if judged["met"] else f"MISSED ({below})"
        print(f"  {name:19} {judged['value']:8.3f} (target >= {judged['target']}): {state}")
        if not judged["met"]:
            print(f"  SHORTFALL: {name} {judged['value']:.3f} < {judged['target']}")
    print("bytes per row on disk (heap + indexes + TOAST, all shards):", sizes)
    payload = {
        "repeats": args.repeats,
        "rows_per_run": args.rows,
        "machine_note": "2 cores, router + 13 PostgreSQL + client on one host",
        "rest": [r.summary() for r in rest],
        "raw_copy": {"audit": copy_audit.summary(), "flow": copy_flows.summary()},
        "seed": seed_result.summary(),
        "best": {"audit": best_audit.summary(), "flow": best_flows.summary()},
        "head_to_head": {"audit": duel_audit, "flow": duel_flows, "flow_merge_peer": duel_merge},
        "bytes_per_row": sizes,
        "ratios": verdicts,
    }
    json_path, png_path = write_results(
        "ingest", payload, plot(payload), mode=mode_of(parser, args)
    )
    print(f"wrote {json_path} and {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
