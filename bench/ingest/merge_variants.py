"""bench/ingest/merge_variants: what the flow merge (ddl.flow_merge_sql) costs PostgreSQL per
row, and what candidate changes to it would save, side by side on one shard.

The bench/merge_peer.py write (binary COPY into the staging table, then the merge, one
transaction per part) into a new day table (every key new: the insert path), then the same
rows again (every key present: the update path), with the shard backend's CPU read from /proc
around the COPY and around the merge. Variants, alternated over ``--repeats`` rounds, medians:

- now: the merge as router/db/ddl.py has it (ORDER BY the unique key);
- no-order: without the ORDER BY;
- presorted: the staged rows sent already in key order (the sort moves to the writer);
- fillfactor-90: day table pages 10 % empty, so updates may stay on their page (HOT).

    python -m bench.ingest.merge_variants [--rows 40000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

from bench.harness import grouped_bars, verdict, write_results
from bench.ingest import generate, merge, storage
from bench.merge_peer import MergePeer, Staged
from bench.stamps import mode_of
from router.db import ddl
from router.db.names import DayTable

PARTS = (416, 4_000)  # rows per part: bench/ingest's 10k- and 100k-row requests' parts
PATHS = ("new_keys", "existing_keys")
VARIANTS = ("now", "no-order", "presorted", "fillfactor-90")
# The merge kept must stay the cheapest of the changes made in SQL alone (presorting moves the
# sort to the writer, so it is compared apart): now ÷ the cheapest of them, with 5 % for noise.
SQL_ONLY = ("no-order", "fillfactor-90")
KEEP_TARGET = 1.05


def unordered_merge(table: DayTable) -> str:
    return ddl.flow_merge_sql(table).replace(f" ORDER BY {', '.join(ddl.FLOW_KEY)}", "")


def key_order(row: Staged) -> tuple[Any, ...]:
    """The unique key's order for host addresses (binary inet: family, then address bytes)."""
    return (row[0], row[1], row[2], row[3], -1 if row[5] is None else row[5])


async def one(dsn: str, rows: list[Staged], part: int, variant: str) -> dict[str, list[float]]:
    peer = MergePeer([dsn])
    await peer.open()
    table = peer.table
    assert table is not None
    if variant == "no-order":
        peer.merge_sql = unordered_merge
    if variant == "fillfactor-90":
        await peer.connections[0].execute(f"ALTER TABLE {table.quoted} SET (fillfactor = 90)")
    staged = sorted(rows, key=key_order) if variant == "presorted" else rows
    peer.account = True
    costs = {}
    try:
        for path in PATHS:
            peer.stage_cpu_s = peer.merge_cpu_s = 0.0
            await peer.write([staged], part)
            costs[path] = [peer.stage_cpu_s / len(rows) * 1e6, peer.merge_cpu_s / len(rows) * 1e6]
    finally:
        await peer.close()
    return costs


async def run(dsn: str, rows: list[Staged], repeats: int) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for part in PARTS:
        samples: dict[str, list[dict[str, list[float]]]] = {v: [] for v in VARIANTS}
        for _ in range(repeats):
            for variant in VARIANTS:
                samples[variant].append(await one(dsn, rows, part, variant))
        found[str(part)] = {
            variant: {
                path: {
                    "stage_us_per_row": round(statistics.median(s[path][0] for s in runs), 2),
                    "merge_us_per_row": round(statistics.median(s[path][1] for s in runs), 2),
                }
                for path in PATHS
            }
            for variant, runs in samples.items()
        }
        for variant, costs in found[str(part)].items():
            print(f"  parts of {part:>5} {variant:14} {costs}", flush=True)
    return found


def targets(results: dict[str, Any]) -> dict[str, Any]:
    found = {}
    for part, by in results.items():
        for path in PATHS:
            now = by["now"][path]["merge_us_per_row"]
            best = min(by[v][path]["merge_us_per_row"] for v in SQL_ONLY)
            found[f"parts_{part}_{path}_now_vs_best_sql_variant"] = verdict(
                round(now / best, 3), KEEP_TARGET
            )
    return found


def plot(results: dict[str, Any]) -> Any:
    def draw(figure: Any) -> None:
        for position, path in enumerate(PATHS, start=1):
            axes = figure.add_subplot(1, 2, position)
            parts = list(results)
            grouped_bars(
                axes,
                [f"parts of {p} rows" for p in parts],
                {v: [results[p][v][path]["merge_us_per_row"] for p in parts] for v in VARIANTS},
            )
            axes.set_ylabel("merge: shard backend CPU µs per row (median)")
            axes.set_title(f"flow merge, {path.replace('_', ' ')}")
            axes.legend(fontsize=7)

    return draw


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ingest.merge_variants")
    parser.add_argument("--rows", type=int, default=40_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=Path("var/bench-merge"))
    parser.add_argument("--keep", action="store_true", help="keep the cluster's data directory")
    args = parser.parse_args()
    rows = merge.staged_rows(generate.flow_records(args.rows, ["merge"], seed=2))
    results = storage.on_one_shard(
        args.data_dir, args.keep, lambda dsn: run(dsn, rows, args.repeats)
    )
    found = targets(results)
    for name, value in found.items():
        state = "met" if value["met"] else "SHORTFALL"
        print(f"  {name:45} {value['value']:6.3f} (target <= {KEEP_TARGET}): {state}")
    payload = {"rows": args.rows, "repeats": args.repeats, "results": results, "targets": found}
    json_path, png_path = write_results(
        "ingest-merge", payload, plot(results), mode=mode_of(parser, args)
    )
    print(f"wrote {json_path} and {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
