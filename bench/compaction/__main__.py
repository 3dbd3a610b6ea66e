"""bench/compaction: issue 37's targets for compaction itself, side by side in one run on one
shard of the project's launcher and its router (docs/architecture.md "Compacted days"):

- rates: a closed day of real lines (bench/storage/corpus, ``--copies`` x 16 owners of
  ``--per-owner`` lines) ingested through the router's REST /v1/audit, then compacted by the
  real engine (`shardlog compact --day D --clear-now`'s run, in this process): rows per
  elapsed second of each, and per CPU-second (router or compacting process, plus every
  PostgreSQL process). Target: compaction >= 5x ingest, elapsed (one shard: the run is one
  sequential job, one core). Where the copy's time goes, statement by statement, beside it.
- beside: one client writing today's rows in fixed batches, alone and while `shardlog
  compact` (a process of its own) compacts another closed day of the same size, and beside a
  compaction throttled by SHARDLOG_COMPACTION__MAX_ROWS_PER_S (context); the order reverses
  each repeat. Target: rows/s beside >= 0.8x alone.
- pages: 1,000-row pages through the REST search of a compacted owner-day and of the same
  rows in the heap (two owners, identical rows): first page ascending, descending, second
  page by cursor. Target: compacted p50 <= 25 ms; the heap's as context.

    python -m bench.compaction [--quick] [--repeats 5] [--copies 4] [--per-owner 2000]
        [--ingest-clients 2] [--writer-batch 1000] [--throttle-rows-per-s 20000]
        [--page-rows 4000] [--page-repeats 31]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from bench import baseline
from bench.compaction import beside, day, pages, rates
from bench.harness import (
    bench_cluster,
    bench_settings,
    context,
    grouped_bars,
    print_verdicts,
    verdict,
    write_results,
)
from bench.stamps import mode_of
from bench.storage import corpus
from router import clock
from router.compaction.runner import Scope
from router.settings import Settings

COMPACTION_VS_INGEST = 5.0
WRITES_BESIDE_VS_ALONE = 0.8
PAGE_P50_MS = 25.0


def median_ratio(pairs: list[tuple[float, float]]) -> float:
    return round(statistics.median(a / b for a, b in pairs), 3)


def rates_phase(
    settings: Settings, cluster: Any, router: Any, days: list[date], args: argparse.Namespace
) -> dict[str, Any]:
    """Each day (the first a warm-up) ingested, then compacted."""
    runs: list[dict[str, Any]] = []
    for k, when in enumerate(days):
        rows = day.day_rows(when, args.copies, args.per_owner, f"rate{k}-")
        ingested = day.ingest(router.url, router.pid(), cluster, rows, args.ingest_clients)
        compacted, steps = asyncio.run(rates.compact(settings, cluster, Scope(day=when), len(rows)))
        run: dict[str, Any] = {
            "day": when.isoformat(),
            "ingest": ingested.summary(),
            "compaction": compacted.summary(),
            "step_seconds": steps,
        }
        print(
            f"  {'warm-up' if k == 0 else f'repeat {k}'}: ingest {run['ingest']}\n"
            f"    compaction {run['compaction']} steps {steps}",
            flush=True,
        )
        if k:
            runs.append(run)
    return {
        "rows": runs[0]["ingest"]["rows"],
        "owners": args.copies * len(corpus.systems()),
        "runs": runs,
        "ingest_rows_per_s": statistics.median(r["ingest"]["rows_per_s"] for r in runs),
        "compaction_rows_per_s": statistics.median(r["compaction"]["rows_per_s"] for r in runs),
        "compaction_vs_ingest": median_ratio(
            [(r["compaction"]["rows_per_s"], r["ingest"]["rows_per_s"]) for r in runs]
        ),
        "compaction_vs_ingest_per_cpu_s": median_ratio(
            [(r["compaction"]["rows_per_cpu_s"], r["ingest"]["rows_per_cpu_s"]) for r in runs]
        ),
    }


def beside_phase(
    settings: Settings,
    cluster: Any,
    router: Any,
    days: list[tuple[date, date]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Two days per repeat loaded (untimed), one's copy profiled (rolled back), then the
    writer beside the first day's compaction, alone, and beside the second day's compaction
    throttled to ``--throttle-rows-per-s`` (the order reversed every other repeat): alone for
    as long as the last writer beside an unthrottled compaction took."""
    for k, pair in enumerate(days):
        for n, when in enumerate(pair):
            rows = day.day_rows(when, args.copies, args.per_owner, f"beside{k}-{n}-")
            day.ingest(router.url, router.pid(), cluster, rows, args.ingest_clients)
    profile = asyncio.run(rates.copy_profile(settings, days[0][0]))
    print(f"  the copy's statements, one day, seconds: {profile}", flush=True)
    lines = [line for lines in corpus.systems().values() for line in lines]
    batch = args.writer_batch
    asyncio.run(beside.alone(router.url, lines, batch, 1.0))  # warm-up: the owner, today's table
    phases = ("beside", "alone", "throttled")
    runs = []
    alone_s = 0.0
    for k, (when, throttled_day) in enumerate(days):
        measured: dict[str, Any] = {}
        for phase in phases if k % 2 == 0 else phases[::-1]:
            if phase == "alone":
                rows_, seconds = asyncio.run(beside.alone(router.url, lines, batch, alone_s or 1.0))
                measured["alone"] = {"rows": rows_, "seconds": round(seconds, 3)}
                continue
            throttle = args.throttle_rows_per_s if phase == "throttled" else 0
            found = asyncio.run(
                beside.beside(
                    settings,
                    router.url,
                    lines,
                    batch,
                    throttled_day if throttle else when,
                    throttle,
                )
            )
            measured[phase] = {name: round(v, 3) for name, v in found.items()}
            if not throttle:
                alone_s = found["seconds"]
        for phase in phases:
            measured[phase]["rows_per_s"] = round(
                measured[phase]["rows"] / measured[phase]["seconds"]
            )
        for phase in ("beside", "throttled"):
            measured[f"{phase}_ratio"] = round(
                measured[phase]["rows_per_s"] / measured["alone"]["rows_per_s"], 3
            )
        print(f"  repeat {k + 1}: {measured}", flush=True)
        runs.append(measured)
    return {
        "writer_batch": batch,
        "throttle_rows_per_s": args.throttle_rows_per_s,
        "runs": runs,
        **{
            f"{phase}_rows_per_s": statistics.median(r[phase]["rows_per_s"] for r in runs)
            for phase in phases
        },
        "beside_vs_alone": round(statistics.median(r["beside_ratio"] for r in runs), 3),
        "throttled_vs_alone": round(statistics.median(r["throttled_ratio"] for r in runs), 3),
        "copy_profile_s": profile,
    }


def pages_phase(
    settings: Settings, cluster: Any, router: Any, when: date, args: argparse.Namespace
) -> dict[str, Any]:
    rows = pages.page_rows(when, args.page_rows)
    day.ingest(router.url, router.pid(), cluster, rows, 1)
    ids = asyncio.run(rates.owner_ids(settings, [pages.OWNERS[pages.COMPACTED]]))
    asyncio.run(rates.compact(settings, cluster, Scope(day=when, owner_ids=ids), len(rows) // 2))
    measured = asyncio.run(pages.measure(router.url, when, rows, args.page_repeats))
    print(f"  pages p50 ms {measured['p50_ms']}, equal {measured['equal_to_rows_written']}")
    return measured


def targets(measured: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    found, beside_, paged = measured["rates"], measured["beside"], measured["pages"]
    judged = {
        "compaction_vs_ingest_rows_per_s": verdict(
            found["compaction_vs_ingest"], COMPACTION_VS_INGEST, at_most=False
        ),
        "writes_beside_compaction_vs_alone": verdict(
            beside_["beside_vs_alone"], WRITES_BESIDE_VS_ALONE, at_most=False
        ),
        **{
            f"page1000_{form}_compacted_p50_ms": verdict(
                paged["p50_ms"][form][pages.COMPACTED], PAGE_P50_MS
            )
            for form in pages.FORMS
        },
    }
    shown = {
        "writes_beside_throttled_compaction_vs_alone": context(
            beside_["throttled_vs_alone"],
            f"the writer beside a compaction throttled to {beside_['throttle_rows_per_s']:,} "
            "rows/s (SHARDLOG_COMPACTION__MAX_ROWS_PER_S) ÷ alone: what the throttle buys; "
            "not a target (the default is unthrottled)",
        ),
        "compaction_floor_vs_ingest_rows_per_s": context(
            floor_vs_ingest(beside_["copy_profile_s"], found),
            "the rate of one core doing only the work no copy of these rows into these "
            "segments avoids (the heap read in order, pack, grams, the heap's checksum and the "
            "unpacked segments' checksum; copy_profile_s, one day) ÷ ingest rows/s: an upper "
            "bound of compaction_vs_ingest with the codec and its verification in PostgreSQL",
        ),
        "compaction_vs_ingest_rows_per_cpu_s": context(
            found["compaction_vs_ingest_per_cpu_s"],
            "compaction rows per CPU-second (compacting process + PostgreSQL) ÷ ingest's "
            "(router + PostgreSQL): what a row costs each, whatever the cores",
        ),
        **{
            f"page1000_{form}_compacted_vs_heap": context(
                round(
                    paged["p50_ms"][form][pages.COMPACTED] / paged["p50_ms"][form][pages.HEAP], 3
                ),
                "compacted p50 ÷ the same rows' heap p50 (not a target: the target is 25 ms)",
            )
            for form in pages.FORMS
        },
    }
    return judged, shown


FLOOR_STATEMENTS = (
    "floor_read_ordered",
    "floor_pack",
    "floor_grams",
    "heap_checksum",
    "verify_unpacked",
)


def floor_vs_ingest(profile: dict[str, float], found: dict[str, Any]) -> float:
    """The rows per second of the floor work alone over ingest's rows per second."""
    seconds = sum(profile[name] for name in FLOOR_STATEMENTS)
    return round(float(found["rows"]) / seconds / float(found["ingest_rows_per_s"]), 3)


def plot(payload: dict[str, Any]) -> Any:
    def draw(figure: Any) -> None:
        found, beside_, paged = payload["rates"], payload["beside"], payload["pages"]
        axes = figure.add_subplot(1, 3, 1)
        axes.bar(
            ["REST ingest", "compaction"],
            [found["ingest_rows_per_s"], found["compaction_rows_per_s"]],
            color=["tab:blue", "tab:orange"],
        )
        axes.axhline(found["ingest_rows_per_s"] * COMPACTION_VS_INGEST, color="red", linestyle="--")
        axes.set_ylabel("rows per second, elapsed (median)")
        axes.set_title(f"one day of {found['rows']:,} rows (red: 5x ingest)", fontsize=9)
        axes = figure.add_subplot(1, 3, 2)
        axes.bar(
            ["alone", "beside\ncompaction", "beside\nthrottled"],
            [
                beside_["alone_rows_per_s"],
                beside_["beside_rows_per_s"],
                beside_["throttled_rows_per_s"],
            ],
            color=["tab:blue", "tab:orange", "tab:green"],
        )
        axes.axhline(
            beside_["alone_rows_per_s"] * WRITES_BESIDE_VS_ALONE, color="red", linestyle="--"
        )
        axes.set_ylabel("writer rows per second (median)")
        axes.set_title(f"writes of {beside_['writer_batch']} rows (red: 0.8x)", fontsize=9)
        axes = figure.add_subplot(1, 3, 3)
        grouped_bars(
            axes,
            list(pages.FORMS),
            {
                layout: [paged["p50_ms"][f][layout] for f in pages.FORMS]
                for layout in (pages.HEAP, pages.COMPACTED)
            },
        )
        axes.axhline(PAGE_P50_MS, color="red", linestyle="--")
        axes.set_ylabel("1,000-row page p50, ms")
        axes.set_title("REST pages, same rows (red: 25 ms)", fontsize=9)
        axes.legend(fontsize=7)

    return draw


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.compaction")
    p.add_argument("--quick", action="store_true", help="small days, few repeats: seconds")
    p.add_argument("--repeats", type=int, default=5, help="measured days of each phase")
    p.add_argument("--copies", type=int, default=4, help="times 16 owners a day")
    p.add_argument("--per-owner", type=int, default=2000, help="lines per owner (max 2000)")
    p.add_argument("--ingest-clients", type=int, default=2)
    p.add_argument("--writer-batch", type=int, default=1000, help="rows per write beside")
    p.add_argument(
        "--throttle-rows-per-s",
        type=int,
        default=20_000,
        help="SHARDLOG_COMPACTION__MAX_ROWS_PER_S of the throttled compaction beside the writer",
    )
    p.add_argument("--page-rows", type=int, default=4000, help="rows of each page owner")
    p.add_argument("--page-repeats", type=int, default=31)
    p.add_argument("--data-dir", type=Path, default=Path("var/bench-compaction"))
    p.add_argument("--keep", action="store_true", help="keep the cluster's data directory")
    return p


def main() -> int:
    arguments = parser()
    args = arguments.parse_args()
    if args.quick:
        args.repeats, args.copies, args.per_owner = 2, 1, 500
        args.page_rows, args.page_repeats = 2500, 9
        args.throttle_rows_per_s = 4000
    settings = bench_settings(args.data_dir, shards=1, groups=1)
    today = clock.today()
    # Closed days well inside the default retention (30 days), one per day of each phase.
    rate_days = [today - timedelta(days=3 + k) for k in range(args.repeats + 1)]
    beside_days = [
        (today - timedelta(days=10 + k), today - timedelta(days=20 + k))
        for k in range(args.repeats)
    ]
    page_day = today - timedelta(days=18)
    load = {"before": os.getloadavg()}
    try:
        with bench_cluster(settings) as (cluster, router):
            assert router is not None
            print("rates: ingest, then compaction of each day", flush=True)
            found = rates_phase(settings, cluster, router, rate_days, args)
            print("beside: writes alone and beside a compaction", flush=True)
            beside_ = beside_phase(settings, cluster, router, beside_days, args)
            print("pages: 1,000-row pages, compacted and heap", flush=True)
            paged = pages_phase(settings, cluster, router, page_day, args)
    finally:
        if not args.keep:
            shutil.rmtree(args.data_dir, ignore_errors=True)
    load["after"] = os.getloadavg()
    measured = {"rates": found, "beside": beside_, "pages": paged}
    judged, shown = targets(measured)
    print_verdicts(judged)
    payload = {
        "corpus": "loghub's real lines (bench/storage/corpus), one owner per system and copy",
        "shards": 1,
        "ingest_clients": args.ingest_clients,
        "ingest_body_rows": day.BODY_ROWS,
        **measured,
        "targets": judged,
        "context": shown,
        # The machine's load average (1, 5, 15 min) around the run: other work shares its
        # cores, which absolute figures (the page p50s) feel and side-by-side ratios less.
        "load_average": {k: [round(x, 2) for x in v] for k, v in load.items()},
        "machine_note": baseline.MACHINE_NOTE,
    }
    json_path, png_path = write_results(
        "compaction", payload, plot(payload), mode=mode_of(arguments, args)
    )
    print(f"wrote {json_path} and {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
