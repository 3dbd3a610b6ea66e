"""bench/storage: bytes per row on disk and searches of the same rows in shardlog's layouts
(heap day tables, packed lz4 arrays, zstd segments of the extension shardlog_segments) and in
VictoriaLogs, run side by side: the measurement behind compacted days' codec (issue 37,
docs/architecture.md "Compacted days").

Rows: the real log lines of bench/storage/corpus (loghub, 16 systems, each line once, one
owner per system) and the synthetic 512-character text over 'abcdef ' (one owner), over one
past UTC day. VictoriaLogs is built from its Go module when its cached binary is missing
(bench/storage/victorialogs.py); if it cannot be built, the run says so and compares with
nothing in its place. PostgreSQL: one shard of the project's launcher, and its router for the
REST ingest of the same rows (bench/storage/rest_ingest.py).

    python -m bench.storage [--quick] [--repeats 21] [--per-owner 2000]
        [--synthetic-rows 32000] [--victorialogs-port 22428]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg

from bench import baseline
from bench.harness import (
    bench_cluster,
    bench_settings,
    context,
    cpu_seconds,
    grouped_bars,
    print_verdicts,
    verdict,
    write_results,
)
from bench.stamps import mode_of
from bench.storage import corpus, layouts, rest_ingest, searches, victorialogs
from bench.storage.corpus import Row
from bench.storage.searches import Search
from router.search.query import Window

RARE_SHARE = 0.0005
COMMON_SHARE = 0.10
TARGETS = {
    "real_bytes_compacted_vs_victorialogs": 1.5,
    "synthetic_bytes_compacted_vs_victorialogs": 1.0,
    "rare_first_page_compacted_vs_victorialogs": 1.0,
    "rare_count_compacted_vs_victorialogs": 1.0,
    "common_first_page_compacted_vs_heap": 2.0,
    "real_ingest_rest_vs_victorialogs": 1.0,  # rows per CPU-second, at least
}
HEAP, LZ4, ZSTD, VL = "heap", "lz4_arrays", "zstd_segments", "victorialogs"


def describe_corpus(real: list[Row], synthetic: list[Row]) -> dict[str, Any]:
    owners = sorted({r.owner for r in real})
    sizes = [len(r.content.encode()) for r in real]
    return {
        "source": "https://github.com/logpai/loghub",
        "commit": "dd61d0952749ee7963bde24220d1be5ede023033",
        "files": "<System>/<System>_2k.log, committed as bench/storage/corpus/*.gz",
        "systems": owners,
        "real_rows": len(real),
        "real_mean_bytes": round(sum(sizes) / len(sizes), 1),
        "synthetic_rows": len(synthetic),
        "synthetic_bytes": 512,
        "day": real[0].ts.date().isoformat(),
    }


def plan(real: list[Row], synthetic: list[Row]) -> list[tuple[str, Search]]:
    """The searches and their data sets, chosen from the rows deterministically."""
    rare = corpus.pattern_with_share(real, RARE_SHARE)
    common = corpus.pattern_with_share(real, COMMON_SHARE)
    hour = Window(*corpus.busiest_hour(real, rare))
    synthetic_hour = Window(*corpus.busiest_hour(synthetic, "abc"))
    return [
        ("real", Search("rare_first_page", (rare,), hour, False)),
        ("real", Search("rare_count", (rare,), hour, True)),
        ("real", Search("common_first_page", (common,), hour, False)),
        ("real", Search("common_count", (common,), hour, True)),
        (
            "synthetic",
            Search("synthetic_abc_bcd_first_page", ("abc", "bcd"), synthetic_hour, False),
        ),
    ]


async def postgres_side(
    connection: asyncpg.Connection, name: str, rows: list[Row], base: int
) -> tuple[layouts.Loaded, str | None, dict[str, Any]]:
    """The data set's layouts on the shard: bytes per row of each, and the backend's CPU
    per row while it wrote the heap (COPY) and packed the zstd segments (compaction)."""
    backend = await connection.fetchval("SELECT pg_backend_pid()")
    before = cpu_seconds(backend)
    loaded = await layouts.load_heap(connection, rows, rows[0].ts.date(), base)
    copy_cpu = cpu_seconds(backend) - before
    measured: dict[str, Any] = {
        HEAP: {"bytes_per_row": round(await layouts.heap_bytes(connection, loaded) / len(rows), 1)},
        LZ4: {"bytes_per_row": round(await layouts.pack_lz4(connection, loaded) / len(rows), 1)},
    }
    measured[LZ4] |= await layouts.lz4_parts(connection)
    measured[HEAP]["copy_rows_per_cpu_s"] = round(len(rows) / copy_cpu)
    missing = await layouts.has_extension(connection)
    segments = None
    if missing is None:
        before = cpu_seconds(backend)
        segments, size = await layouts.pack_zstd(connection, loaded)
        pack_cpu = cpu_seconds(backend) - before
        measured[ZSTD] = {
            "bytes_per_row": round(size / len(rows), 1),
            **await layouts.zstd_parts(connection, segments),
            "pack_rows_per_cpu_s": round(len(rows) / pack_cpu),
        }
    else:
        measured[ZSTD] = {"not_measured": missing}
    for layout, figures in measured.items():
        print(f"  {name:9} {layout:14} {figures}", flush=True)
    return loaded, segments, measured


async def measure(
    dsn: str,
    data: dict[str, list[Row]],
    planned: list[tuple[str, Search]],
    build: victorialogs.Build,
    port: int,
    repeats: tuple[int, int],
) -> dict[str, Any]:
    """Every layout, search and VictoriaLogs figure of the data sets; ``repeats``: of each
    search, and of each ingest (fresh VictoriaLogs instances)."""
    searches_repeats, ingest_repeats = repeats
    connection = await asyncpg.connect(dsn)
    home = Path(f"/tmp/shardlog-bench-storage-{port}")
    sizes: dict[str, Any] = {}
    found: dict[str, Any] = {}
    ingest: dict[str, Any] = {}
    try:
        for index, (name, rows) in enumerate(data.items()):
            loaded, segments, sizes[name] = await postgres_side(
                connection, name, rows, layouts.OWNER_BASE + 100 * index
            )
            mine = [search for of, search in planned if of == name]
            if build.binary is None:
                found |= await ask_all(connection, loaded, segments, None, mine, searches_repeats)
                continue
            with victorialogs.running(build.binary, port, home / name) as peer:
                cpu = [peer.load(rows)]
                peer.merge()
                sizes[name][VL] = {"bytes_per_row": round(peer.bytes_on_disk() / len(rows), 1)}
                found |= await ask_all(connection, loaded, segments, peer, mine, searches_repeats)
            for run in range(1, ingest_repeats):
                with victorialogs.running(build.binary, port, home / f"{name}-{run}") as peer:
                    cpu.append(peer.load(rows))
            ingest[name] = {
                "victorialogs_rows_per_cpu_s": round(len(rows) / statistics.median(cpu)),
                "victorialogs_rows_per_cpu_s_runs": [round(len(rows) / c) for c in cpu],
            }
            print(f"  {name:9} {VL:14} {sizes[name][VL]} {ingest[name]}", flush=True)
    finally:
        await connection.close()
        shutil.rmtree(home, ignore_errors=True)
    for name, figures in sizes.items():
        ingest.setdefault(name, {})["heap_copy_postgres_rows_per_cpu_s"] = figures[HEAP][
            "copy_rows_per_cpu_s"
        ]
    return {"layouts": sizes, "searches": found, "ingest": ingest}


async def ask_all(
    connection: asyncpg.Connection,
    loaded: layouts.Loaded,
    segments: str | None,
    peer: victorialogs.VictoriaLogs | None,
    planned: list[Search],
    repeats: int,
) -> dict[str, Any]:
    found = {}
    tables = list(loaded.tables.values())
    for search in planned:
        stores = {
            HEAP: searches.sql_asker(
                connection, searches.heap_statement(search, tables), search.count
            )
        }
        if segments is not None:
            statement = searches.segments_statement(search, segments, loaded.owner_ids)
            stores[ZSTD] = searches.sql_asker(connection, statement, search.count)
        if peer is not None:
            stores[VL] = searches.victorialogs_asker(peer, search)
        found[search.name] = await searches.run(search, stores, repeats)
        print(
            f"  {search.name:30} {found[search.name]['median_ms']} "
            f"answer {found[search.name]['answer']} equal {found[search.name]['equal']}",
            flush=True,
        )
    return found


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, 3)


def targets(measured: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    sizes, found = measured["layouts"], measured["searches"]

    def size(data: str, layout: str) -> float | None:
        value = sizes[data].get(layout, {}).get("bytes_per_row")
        return float(value) if value is not None else None

    def took(search: str, store: str) -> float | None:
        value = found.get(search, {}).get("median_ms", {}).get(store)
        return float(value) if value is not None else None

    values = {
        "real_bytes_compacted_vs_victorialogs": ratio(size("real", ZSTD), size("real", VL)),
        "synthetic_bytes_compacted_vs_victorialogs": ratio(
            size("synthetic", ZSTD), size("synthetic", VL)
        ),
        "rare_first_page_compacted_vs_victorialogs": ratio(
            took("rare_first_page", ZSTD), took("rare_first_page", VL)
        ),
        "rare_count_compacted_vs_victorialogs": ratio(
            took("rare_count", ZSTD), took("rare_count", VL)
        ),
        "common_first_page_compacted_vs_heap": ratio(
            took("common_first_page", ZSTD), took("common_first_page", HEAP)
        ),
    }
    ingest = measured["ingest"].get("real", {})
    values["real_ingest_rest_vs_victorialogs"] = ratio(
        ingest.get("shardlog_rest_rows_per_cpu_s"), ingest.get("victorialogs_rows_per_cpu_s")
    )
    judged = {
        k: verdict(v, TARGETS[k], at_most="ingest" not in k)
        for k, v in values.items()
        if v is not None
    }
    shown = {
        f"{data}_bytes_{layout}_vs_victorialogs": context(
            value,
            f"{layout} bytes/row ÷ VictoriaLogs' (not a target: the heap stays today's "
            "layout, lz4 arrays are the codec not chosen)",
        )
        for data in sizes
        for layout in (HEAP, LZ4)
        if (value := ratio(size(data, layout), size(data, VL))) is not None
    }
    for name in found:
        value = ratio(took(name, HEAP), took(name, VL))
        if value is not None:
            shown[f"{name}_heap_vs_victorialogs"] = context(
                value, "today's heap ÷ VictoriaLogs: the layout compacted days replace"
            )
    return judged, shown


def plot(payload: dict[str, Any]) -> Any:
    def draw(figure: Any) -> None:
        sizes = payload["layouts"]
        data = list(sizes)
        stores = [HEAP, LZ4, ZSTD, VL]
        axes = figure.add_subplot(1, 2, 1)
        grouped_bars(
            axes,
            data,
            {s: [sizes[d].get(s, {}).get("bytes_per_row", 0) for d in data] for s in stores},
        )
        axes.set_ylabel("bytes per row on disk, everything counted")
        axes.set_title("the same rows, by layout")
        axes.legend(fontsize=7)
        found = payload["searches"]
        names = list(found)
        axes = figure.add_subplot(1, 2, 2)
        grouped_bars(
            axes,
            [n.replace("_", "\n", 1) for n in names],
            {s: [found[n]["median_ms"].get(s, 0) for n in names] for s in (HEAP, ZSTD, VL)},
        )
        axes.set_yscale("log")
        axes.set_ylabel("median ms, warm (log scale)")
        axes.set_title("the same searches, same answers")
        axes.tick_params(axis="x", labelsize=7)
        axes.legend(fontsize=7)

    return draw


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.storage")
    parser.add_argument("--quick", action="store_true", help="500 lines per system, 5 repeats")
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--ingest-repeats", type=int, default=5, help="loads of each data set")
    parser.add_argument("--per-owner", type=int, default=2000, help="lines per system (max 2000)")
    parser.add_argument("--synthetic-rows", type=int, default=32_000)
    parser.add_argument("--victorialogs-port", type=int, default=22428)
    parser.add_argument("--data-dir", type=Path, default=Path("var/bench-storage-layouts"))
    parser.add_argument("--keep", action="store_true", help="keep the shard's data directory")
    args = parser.parse_args()
    repeats = 5 if args.quick else args.repeats
    ingest_repeats = 1 if args.quick else args.ingest_repeats
    per_owner = 500 if args.quick else args.per_owner
    synthetic_rows = 4_000 if args.quick else args.synthetic_rows
    day = corpus.past_day()
    data = {
        "real": corpus.real_rows(day, per_owner),
        "synthetic": corpus.synthetic_rows(day - timedelta(days=1), synthetic_rows),
    }
    planned = plan(data["real"], data["synthetic"])
    build = victorialogs.build()
    if build.binary is None:
        print(f"SHORTFALL: VictoriaLogs {build.note}; nothing stands in for it", flush=True)
    settings = bench_settings(args.data_dir, shards=1, groups=1)
    try:
        with bench_cluster(settings) as (cluster, router):
            measured = asyncio.run(
                measure(
                    cluster.shards[0].spec.dsn(),
                    data,
                    planned,
                    build,
                    args.victorialogs_port,
                    (repeats, ingest_repeats),
                )
            )
            router_pid = router.pid() if router is not None else None
            assert router is not None and router_pid is not None
            for name, rows in data.items():
                rest = rest_ingest.median_of(router.url, router_pid, cluster, rows, ingest_repeats)
                measured["ingest"][name] |= rest
                print(f"  {name:9} REST ingest    {rest}", flush=True)
    finally:
        if not args.keep:
            shutil.rmtree(args.data_dir, ignore_errors=True)
    judged, shown = targets(measured)
    report(judged, measured)
    payload = {
        "corpus": describe_corpus(data["real"], data["synthetic"]),
        "victorialogs": build.record(),
        "repeats": repeats,
        "ingest_repeats": ingest_repeats,
        **measured,
        "targets": judged,
        "context": shown,
        "machine_note": baseline.MACHINE_NOTE,
    }
    json_path, png_path = write_results(
        "storage", payload, plot(payload), mode=mode_of(parser, args)
    )
    print(f"wrote {json_path} and {png_path}")
    return 0


def report(judged: dict[str, Any], measured: dict[str, Any]) -> None:
    print_verdicts(judged)
    for name, found in measured["searches"].items():
        if not found["equal"]:
            print(f"  answers differ in {name}: {'; '.join(found['differences'])}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
