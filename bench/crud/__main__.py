"""bench/crud: the founding reports' flow experiment through shardlog's API. N flows (5-tuples
of random IPv4/IPv6 addresses and ports, forward and reverse pairs) are inserted, written again
with new counters (the merge path), searched by source address, destination port and full
5-tuple, and deleted, at 100, 1,000, 10,000 and 100,000 rows per request (page size for
searches), on a fresh 12-shard cluster per shared_buffers setting (same flows, same seed).
Prints seconds per 1M rows and rows/s per cell and a table beside the reports' figures; writes
bench/results/crud.{json,png}.

    python -m bench.crud [--rows 1000000] [--shared-buffers 128MB,1GB] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
from pathlib import Path
from typing import Any

from bench.crud import flows, results
from bench.crud.sweep import Checks, Plan, run
from bench.harness import auth_for, bench_cluster, bench_settings
from bench.stamps import mode_of

BATCHES = (100, 1_000, 10_000, 100_000)
SWITCHES = 8
# The router's search limits, raised so that a page can hold the largest batch and a shard
# reading it is not cut off by the interactive deadline.
ROUTER_ENV = {
    "SHARDLOG_SEARCH__MAX_LIMIT": str(max(BATCHES)),
    "SHARDLOG_SEARCH__SHARD_TIMEOUT_S": "300",
}


def measure(
    data_dir: Path, shared_buffers: str, flowset: flows.FlowSet, plan: Plan, keep: bool
) -> tuple[list[dict[str, Any]], Checks]:
    settings = bench_settings(data_dir / f"shared_buffers-{shared_buffers}")
    checks = Checks()
    try:
        with bench_cluster(
            settings, router_extra_env=ROUTER_ENV, postgres={"shared_buffers": shared_buffers}
        ) as (_, router):
            assert router is not None
            print(f"shared_buffers {shared_buffers}", flush=True)
            cells = asyncio.run(run(router.url, auth_for(router.url), flowset, plan, checks))
    finally:
        if not keep:
            shutil.rmtree(settings.cluster.data_dir, ignore_errors=True)
    return cells, checks


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.crud")
    parser.add_argument("--rows", type=int, default=1_000_000, help="flows per sweep")
    parser.add_argument(
        "--shared-buffers",
        default="128MB,1GB",
        help="comma-separated shared_buffers values, one fresh cluster each",
    )
    parser.add_argument(
        "--search-rows",
        type=int,
        default=max(BATCHES),
        help="matches each partial-key search pages through at most",
    )
    parser.add_argument("--lookups", type=int, default=500, help="full-tuple searches per batch")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument(
        "--quick", action="store_true", help="20,000 flows, batches 100 and 10,000, 100 lookups"
    )
    parser.add_argument("--data-dir", type=Path, default=Path("var/bench-crud"))
    parser.add_argument("--keep", action="store_true", help="keep the clusters' data")
    args = parser.parse_args()
    rows = 20_000 if args.quick else args.rows
    plan = Plan(
        batches=(100, 10_000) if args.quick else BATCHES,
        search_rows=args.search_rows,
        lookups=100 if args.quick else args.lookups,
    )
    flowset = flows.generate(rows, args.seed, "crud-sw-", SWITCHES, hot_rows=max(plan.batches))
    measured = {
        setting: measure(args.data_dir, setting, flowset, plan, args.keep)
        for setting in args.shared_buffers.split(",")
    }
    shards = bench_settings(args.data_dir).cluster.shards
    document = results.payload(len(flowset.records), args.seed, shards, plan, flowset, measured)
    print("\n".join(results.table(document)))
    for name, target in document["targets"].items():
        print(f"  {name}: {target['value']} ({'met' if target['met'] else 'MISSED'})")
    json_path, png_path = results.write(document, mode_of(parser, args))
    print(f"wrote {json_path} and {png_path}")
    return 0 if all(t["met"] for t in document["targets"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
