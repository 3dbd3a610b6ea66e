"""bench/owners (issue 38): what N small audit owners cost in each layout, side by side in one
run: the shared tables of small owners (SHARDLOG_SHARED__ENABLED=true) and the per-owner day
tables (false). N owners each write 3 rows on each of 3 past days through POST /v1/audit, in
NDJSON requests of many owners; then, per layout and N, on a 4-shard, 2-group cluster of its
own (the shared layout measured first, its days dropped before the per-owner layout runs):

- bytes on disk per owner-day (the shards' pg_database_size after the first pass minus before,
  over N x 3), beside the rows' own payload (content bytes and 8 bytes of ts a row);
- relations per shard (pg_class) and catalog bytes per owner (the metadata database, which
  holds the fdw coordinator, and its system catalog's share);
- the first write of a new owner (one owner per request, one at a time: p50, p95);
- one-owner 1-hour searches of random owners and days (p50, p95; each must find the owner's
  rows);
- a retention dry run and the run dropping the oldest day (the group policies set to keep 2);
- the router's RSS (/proc/PID/status VmRSS) after the first pass and after a second pass over
  the same owners.

The full run also tries the shared layout alone at --alone owners when the write rate measured
at the largest N says it fits --alone-budget-s; else it records the extrapolation, marked as
such, and a SHORTFALL. Writes bench/results/owners.{json,png}.

    python -m bench.owners [--owners 10000,50000] [--alone 1000000] [--quick]
    python -m bench.owners --quick     # 2,000 and 10,000 owners, nothing alone
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench import harness
from bench.harness import bench_cluster, bench_settings, scratch_dir, verdict, write_results
from bench.owners import layout_run
from bench.stamps import mode_of
from router import clock

# The targets, for small owners in the shared layout.
TARGETS = {
    "overhead_bytes_per_owner_day": 1024.0,
    "catalog_bytes_per_owner": 1024.0,
    "relations_per_shard_growth": 1.05,  # largest N over smallest: independent of N
    "first_write_p50_ms": 10.0,
    "search_1h_p50_ms": 10.0,
    "search_1h_p95_ms": 30.0,
    "retention_one_day_s": 10.0,
    "router_rss_mb": 300.0,
    "router_rss_growth_second_pass": 0.10,  # "flat": at most 10 % over the first pass
}


def run_size(args: argparse.Namespace, owners: int, layouts: list[str]) -> list[dict[str, Any]]:
    """Every layout of ``layouts`` at ``owners`` owners, in turn, on one new cluster."""
    settings = bench_settings(
        args.data_dir or scratch_dir(f"shardlog-bench-owners-{owners}-"),
        shards=args.shards,
        groups=args.groups,
        base_port=args.base_port,
        router_port=args.router_port,
    )
    plan = layout_run.Plan(
        owners=owners,
        per_request=args.per_request,
        first_writes=args.first_writes,
        searches=args.searches,
        today=clock.today(),
    )
    with bench_cluster(settings, with_router=False):
        return [layout_run.measure(settings, layout, plan) for layout in layouts]


def alone(
    args: argparse.Namespace, shared: list[dict[str, Any]]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The shared layout alone at ``args.alone`` owners when the largest N's passes, scaled
    linearly, fit the budget; else the extrapolation (not measured) saying why not."""
    largest = max(shared, key=lambda r: r["owners"])
    per_owner_s = (largest["first_pass_s"] + largest["second_pass_s"]) / largest["owners"]
    projected = per_owner_s * args.alone
    found = {
        "owners": args.alone,
        "measured": False,
        "extrapolated_from_owners": largest["owners"],
        "first_pass_owners_per_s_measured": largest["first_pass_owners_per_s"],
        "both_passes_s_extrapolated": round(projected, 3),
        "budget_s": args.alone_budget_s,
        "note": "an extrapolation (both passes' time at the largest N measured, scaled "
        "linearly), not a measurement",
    }
    if projected > args.alone_budget_s:
        return found, []
    measured = run_size(args, args.alone, ["shared"])
    return {**found, "measured": True, "note": "measured"}, measured


def targets(runs: list[dict[str, Any]], million: dict[str, Any] | None) -> dict[str, Any]:
    shared = sorted((r for r in runs if r["layout"] == "shared"), key=lambda r: r["owners"])
    top = shared[-1]
    at = {"owners": top["owners"]}
    rss = top["router_rss_mb"]
    found = {
        "overhead_bytes_per_owner_day": verdict(
            top["disk"]["overhead_bytes_per_owner_day"], TARGETS["overhead_bytes_per_owner_day"]
        )
        | at,
        "catalog_bytes_per_owner": verdict(
            top["catalog"]["bytes_per_owner"], TARGETS["catalog_bytes_per_owner"]
        )
        | at,
        "first_write_p50_ms": verdict(top["first_write"]["p50_ms"], TARGETS["first_write_p50_ms"])
        | at,
        "search_1h_p50_ms": verdict(top["search_1h"]["p50_ms"], TARGETS["search_1h_p50_ms"]) | at,
        "search_1h_p95_ms": verdict(top["search_1h"]["p95_ms"], TARGETS["search_1h_p95_ms"]) | at,
        "retention_one_day_s": verdict(
            top["retention"]["run"]["seconds"], TARGETS["retention_one_day_s"]
        )
        | at,
        "router_rss_mb": verdict(max(rss.values()), TARGETS["router_rss_mb"]) | at,
        "router_rss_growth_second_pass": verdict(
            round(rss["second_pass"] / rss["first_pass"] - 1, 3),
            TARGETS["router_rss_growth_second_pass"],
        )
        | at,
    }
    page = many_owner_page(runs, top)
    if page is not None:
        found["many_owner_page_p50_ms"] = page
    if len(shared) > 1:
        low = shared[0]
        growth = top["relations_per_shard"]["after"] / low["relations_per_shard"]["after"]
        found["relations_per_shard_growth"] = verdict(
            round(growth, 3), TARGETS["relations_per_shard_growth"]
        ) | {"owners": [low["owners"], top["owners"]]}
    if million is not None and not million["measured"]:
        found["alone_within_budget_s"] = verdict(
            million["both_passes_s_extrapolated"], million["budget_s"]
        ) | {
            "owners": million["owners"],
            "extrapolated": True,
        }
    return found


# Owners whose pages of no owner are "today's" time budget per page (issue 38): the
# per-owner layout at this N, measured in the same run.
PAGE_BUDGET_OWNERS = 10_000


def many_owner_page(runs: list[dict[str, Any]], top: dict[str, Any]) -> dict[str, Any] | None:
    """Pages of no owner in the shared layout at its largest N (p50 of the first and the
    following pages) within the per-owner layout's at PAGE_BUDGET_OWNERS, both of this run;
    None when either was not measured (or refused)."""
    budget = next(
        (
            r["many_owner_pages"]["all"]
            for r in runs
            if r["layout"] == "per-owner" and r["owners"] == PAGE_BUDGET_OWNERS
        ),
        None,
    )
    if budget is None or "pages" not in budget:
        return None
    shared = top["many_owner_pages"]["all"]
    if "pages" not in shared:
        return None
    return verdict(shared["pages"]["p50_ms"], budget["pages"]["p50_ms"]) | {
        "owners": top["owners"],
        "limit_is": f"the per-owner layout's p50 at {PAGE_BUDGET_OWNERS:,} owners, same run",
    }


# Rows the housekeeping job deletes after their horizon (SHARDLOG_INGEST__IDEMPOTENCY_KEEP_HOURS,
# SHARDLOG_TAIL__LOG_KEEP_S): on disk while the bench measures, not for the day's life.
TRANSIENT_PARTS = ("ingest_ledger", "tail_log")


def context_figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    shared = max((r for r in runs if r["layout"] == "shared"), key=lambda r: r["owners"])
    parts = shared["disk"]["by_part_per_owner_day"]
    lasting = shared["disk"]["overhead_bytes_per_owner_day"] - sum(
        parts[p] for p in TRANSIENT_PARTS
    )
    found = {
        "overhead_bytes_per_owner_day_beyond_ledger_and_tail_log": harness.context(
            round(lasting, 1),
            f"the shared layout at {shared['owners']:,} owners without its ingest_ledger and "
            "tail_log rows, which housekeeping deletes after their horizons; the target is "
            "judged on the whole",
        )
    }
    closed = shared.get("compacted_day")
    if closed is not None:
        found["closed_day_bytes_per_owner_day"] = harness.context(
            closed["closed_day_bytes_per_owner_day"],
            f"a closed day of the shared layout at {shared['owners']:,} owners once compacted "
            f"(its shared segments, emptied shared table and owner_days rows, per owner-day of "
            f"{closed['rows'] / closed['owner_days']:.1f} rows), where its shared table alone "
            f"held {closed['heap_bytes_per_owner_day']:,.1f} bytes per owner-day; no target "
            "names closed days",
        )
    return found


def plot(runs: list[dict[str, Any]]) -> Any:
    labels = sorted({f"{r['owners']:,}" for r in runs}, key=lambda s: int(s.replace(",", "")))
    panels: tuple[tuple[str, Callable[[dict[str, Any]], float], bool], ...] = (
        ("bytes on disk per owner-day", lambda r: r["disk"]["bytes_per_owner_day"], True),
        ("catalog bytes per owner", lambda r: r["catalog"]["bytes_per_owner"], True),
        ("relations per shard", lambda r: r["relations_per_shard"]["after"], True),
        ("first write of a new owner, p50 ms", lambda r: r["first_write"]["p50_ms"], False),
        ("one-owner 1-hour search, p50 ms", lambda r: r["search_1h"]["p50_ms"], False),
        ("retention run dropping one day, s", lambda r: r["retention"]["run"]["seconds"], True),
    )

    def draw(figure: Any) -> None:
        for index, (title, value, log) in enumerate(panels, start=1):
            axes = figure.add_subplot(2, 3, index)
            series = {
                layout: [
                    next(
                        (
                            value(r)
                            for r in runs
                            if r["layout"] == layout and f"{r['owners']:,}" == label
                        ),
                        0,
                    )
                    for label in labels
                ]
                for layout in layout_run.LAYOUTS
            }
            harness.grouped_bars(axes, labels, series)
            if log:
                axes.set_yscale("log")
            axes.set_title(title, fontsize=9)
            axes.set_xlabel("owners", fontsize=8)
            if index == 1:
                axes.legend(fontsize=8)
        figure.suptitle(
            "small audit owners (3 rows x 3 days each): shared tables vs per-owner tables"
        )

    return draw


def summary_line(run: dict[str, Any]) -> str:
    disk, catalog = run["disk"], run["catalog"]
    return (
        f"{run['layout']:9} {run['owners']:>9,} owners: {disk['bytes_per_owner_day']:,.0f} "
        f"B/owner-day (payload {disk['payload_bytes_per_owner_day']:,.0f}), catalog "
        f"{catalog['bytes_per_owner']:,.0f} B/owner, "
        f"{run['relations_per_shard']['after']:,} relations/shard, first write p50 "
        f"{run['first_write']['p50_ms']} ms, search p50 {run['search_1h']['p50_ms']} ms, "
        f"no-owner page p50 {run['many_owner_pages']['all'].get('pages', {}).get('p50_ms')} ms, "
        f"retention {run['retention']['dry_run']['seconds']} s dry / "
        f"{run['retention']['run']['seconds']} s, RSS MB {run['router_rss_mb']}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.owners")
    parser.add_argument("--owners", default="10000,50000", help="N, each in both layouts")
    parser.add_argument(
        "--alone", type=int, default=1_000_000, help="N of the shared layout alone (0: none)"
    )
    parser.add_argument("--alone-budget-s", type=float, default=3600.0)
    parser.add_argument("--per-request", type=int, default=100, help="owners per write request")
    parser.add_argument("--first-writes", type=int, default=300)
    parser.add_argument("--searches", type=int, default=300)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--layouts", default=",".join(layout_run.LAYOUTS))
    parser.add_argument(
        "--quick", action="store_true", help="2,000 and 10,000 owners, nothing alone"
    )
    parser.add_argument("--base-port", type=int, default=harness.BENCH_BASE_PORT)
    parser.add_argument("--router-port", type=int, default=harness.BENCH_ROUTER_PORT)
    parser.add_argument("--data-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.quick:
        args.owners, args.alone = "2000,10000", 0
    sizes = sorted(int(n) for n in args.owners.split(","))
    layouts = [name for name in layout_run.LAYOUTS if name in args.layouts.split(",")]
    started = clock.time()
    runs = [run for owners in sizes for run in run_size(args, owners, layouts)]
    million = None
    if args.alone and "shared" in layouts:
        million, measured = alone(args, [r for r in runs if r["layout"] == "shared"])
        runs += measured
    found = targets(runs, million) if "shared" in layouts else {}
    elapsed = round(clock.time() - started)
    payload = {
        "params": {
            "owners": sizes,
            "rows_per_owner_day": 3,
            "days": 3,
            "shards": args.shards,
            "groups": args.groups,
            "owners_per_request": args.per_request,
            "clients": layout_run.CLIENTS,
            "first_writes": args.first_writes,
            "searches": args.searches,
        },
        "runs": runs,
        "alone": million,
        "targets": found,
        "context": context_figures(runs) if "shared" in layouts else {},
        "seconds": elapsed,
    }
    paths = write_results("owners", payload, plot(runs), mode=mode_of(parser, args))
    for run in runs:
        print(summary_line(run))
    harness.print_verdicts(found)
    print(f"wrote {paths[0]} and {paths[1]} in {timedelta(seconds=elapsed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
