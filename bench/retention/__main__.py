"""bench/retention: expiring a day of 1M, 5M and 10M audit rows spread over the 12 shards, by a
retention run (DROP TABLE, plus its inventory, plan and history) vs DELETE of the same rows +
VACUUM. Reports wall time and WAL bytes written on the shards; writes
bench/results/retention.{json,png}.

    python -m bench.retention [--sizes 1000000,5000000,10000000] [--repeats 3]

Target: the drop takes <= 1 s and does not grow with the day's size (10x the rows <= 2x the
time). DELETE + VACUUM is measured once per size (it is orders of magnitude slower); the drop
`--repeats` times on freshly loaded days.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg

from bench.harness import bench_cluster, bench_settings, verdict, write_results
from bench.stamps import mode_of
from router import clock
from router.catalog import store
from router.catalog import tables as day_tables
from router.catalog.snapshot import CatalogSnapshot
from router.db import catalog_login, ddl, pools
from router.db.names import DayTable, day_table
from router.retention import inventory
from router.retention.runner import RetentionRunner, RunOptions
from router.settings import Settings

CONTENT = 64  # short rows: the point is the row count, and it keeps WAL and disk small
COPY_BATCH = 100_000
DAY = clock.today() - timedelta(days=3)


def rows_for(count: int, seed: int) -> Any:
    rng = random.Random(seed)
    start = datetime.combine(DAY, datetime.min.time(), UTC)
    step = 86_400 / max(count, 1)
    text = "".join(rng.choice("abcdef ") for _ in range(CONTENT * 2))
    batch = []
    for i in range(count):
        offset = rng.randrange(CONTENT)
        batch.append((start + timedelta(seconds=i * step), text[offset : offset + CONTENT], None))
        if len(batch) == COPY_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


async def load_day(
    metadata: asyncpg.Pool,
    shard_pools: pools.ShardPools,
    snapshot: CatalogSnapshot,
    key: str,
    rows: int,
) -> DayTable:
    """One owner's day, its rows dealt evenly to every shard; registered like ingest does."""
    group = sorted(snapshot.groups)[0]
    mapping = await store.map_owner(metadata, "audit", key, group)
    table = day_table("audit", mapping.id, DAY)
    shards = sorted(snapshot.shards)

    async def one(index: int, shard: str) -> None:
        share = rows // len(shards) + (1 if index < rows % len(shards) else 0)
        async with shard_pools.writer(shard).acquire() as connection:
            await ddl.ensure_table(connection, table, "btree")
            await day_tables.record(
                metadata,
                table,
                snapshot.shards[shard],
                shard_pools.coordinator_login(snapshot.shards[shard].dsn),
            )
            for batch in rows_for(share, index):
                await connection.copy_records_to_table(
                    table.name, records=batch, columns=ddl.AUDIT_COLUMNS
                )
            await connection.execute(f"ANALYZE {table.quoted}")

    await asyncio.gather(*(one(i, s) for i, s in enumerate(shards)))
    return table


async def checkpoint(settings: Settings, snapshot: CatalogSnapshot, shards: list[str]) -> None:
    """CHECKPOINT needs the bootstrap superuser (the DSN's user), not the pools' roles."""

    async def one(shard: str) -> None:
        connection = await pools.connect(snapshot.shards[shard].dsn, settings.pools)
        try:
            await connection.execute("CHECKPOINT")
        finally:
            await connection.close()

    await asyncio.gather(*(one(s) for s in shards))
    await asyncio.to_thread(os.sync)


# Settling time after the checkpoint: the kernel's writeback and discards of the load are done
# before the clock starts, as they are for a day that expired long after it was written.
SETTLE_S = 3.0


def file_release_seconds(directory: Path, mib: int, files: int) -> float:
    """Time the kernel takes to release `files` plain files of `mib` MiB each (written and
    synced first) on the filesystem holding `directory`: the floor under any DROP of that much
    data there, whatever PostgreSQL does."""
    chunk = os.urandom(2**20)
    paths = [directory / f"release-probe-{n}" for n in range(files)]
    try:
        for path in paths:
            with path.open("wb") as handle:
                for _ in range(mib):
                    handle.write(chunk)
                os.fsync(handle.fileno())
        os.sync()
        time.sleep(SETTLE_S)
        started = time.perf_counter()
        for path in paths:
            os.truncate(path, 0)
        return time.perf_counter() - started
    finally:
        for path in paths:
            path.unlink(missing_ok=True)


async def wal_positions(shard_pools: pools.ShardPools, shards: list[str]) -> list[str]:
    return [
        await shard_pools.writer(s).fetchval("SELECT pg_current_wal_insert_lsn()::text")
        for s in shards
    ]


async def wal_since(shard_pools: pools.ShardPools, shards: list[str], before: list[str]) -> int:
    total = 0
    for shard, lsn in zip(shards, before, strict=True):
        total += int(
            await shard_pools.writer(shard).fetchval(
                "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::text::pg_lsn)", lsn
            )
        )
    return total


async def measure(
    settings: Settings, sizes: list[int], repeats: int, data_dir: Path
) -> dict[str, Any]:
    metadata = await catalog_login.open_pool(settings)
    shard_pools = pools.ShardPools(settings.pools)
    results: dict[str, Any] = {"drop": {}, "delete_vacuum": {}}
    try:
        snapshot = await store.load_snapshot(metadata)
        await shard_pools.reconcile(snapshot)
        shards = sorted(snapshot.shards)
        runner = RetentionRunner(
            metadata, shard_pools, settings.retention, settings.ingest.default_keep_days
        )
        stamp = int(clock.time())
        for size in sizes:
            seconds: list[float] = []
            wal: list[int] = []
            released: list[int] = []
            for attempt in range(repeats):
                key = f"bench-drop-{stamp}-{size}-{attempt}"
                table = await load_day(metadata, shard_pools, snapshot, key, size)
                snapshot = await store.load_snapshot(metadata)
                # An expired day is days old: its pages were written out long ago.
                await checkpoint(settings, snapshot, shards)
                await asyncio.sleep(SETTLE_S)
                before = await wal_positions(shard_pools, shards)
                started = time.perf_counter()
                report = await runner.run(
                    snapshot,
                    RunOptions(
                        trigger="cli",
                        as_of=DAY + timedelta(days=settings.ingest.default_keep_days + 1),
                        force=True,
                        scope=inventory.Filter(kind="audit", owner_ids=frozenset({table.owner_id})),
                    ),
                )
                seconds.append(time.perf_counter() - started)
                wal.append(await wal_since(shard_pools, shards, before))
                dropped = sum(1 for d in report.drops if d["outcome"] == "dropped")
                if dropped != len(shards):
                    raise RuntimeError(f"expected {len(shards)} drops: {report.to_json()}")
                released.append(report.totals()["bytes_dropped"])
                print(
                    f"  drop {size:>10,} rows ({released[-1] / 2**20:,.0f} MiB): "
                    f"{seconds[-1] * 1000:8.1f} ms, WAL {wal[-1] / 1024:8.1f} KiB",
                    flush=True,
                )
            per_shard_mib = max(1, round(statistics.median(released) / len(shards) / 2**20))
            floor = await asyncio.to_thread(
                file_release_seconds, data_dir, per_shard_mib, len(shards)
            )
            print(
                f"  kernel releasing {len(shards)} plain files of {per_shard_mib} MiB there: "
                f"{floor * 1000:8.1f} ms",
                flush=True,
            )
            results["drop"][str(size)] = {
                "seconds": seconds,
                "median_s": statistics.median(seconds),
                "wal_bytes": statistics.median(wal),
                "bytes_released": statistics.median(released),
                "plain_file_release_s": floor,
            }
            key = f"bench-delete-{stamp}-{size}"
            table = await load_day(metadata, shard_pools, snapshot, key, size)
            await checkpoint(settings, snapshot, shards)
            before = await wal_positions(shard_pools, shards)
            started = time.perf_counter()

            async def delete_vacuum(shard: str, target: DayTable = table) -> None:
                async with shard_pools.writer(shard).acquire() as connection:
                    await connection.execute("SET statement_timeout = 0")
                    await connection.execute(f"DELETE FROM {target.quoted}")
                    await connection.execute(f"VACUUM {target.quoted}")

            await asyncio.gather(*(delete_vacuum(s) for s in shards))
            elapsed = time.perf_counter() - started
            written = await wal_since(shard_pools, shards, before)
            results["delete_vacuum"][str(size)] = {
                "seconds": [elapsed],
                "median_s": elapsed,
                "wal_bytes": written,
            }
            print(
                f"  DELETE+VACUUM {size:>10,} rows: {elapsed * 1000:8.1f} ms, "
                f"WAL {written / 2**20:8.1f} MiB",
                flush=True,
            )
            # Leave nothing behind: the emptied tables go too.
            snapshot = await store.load_snapshot(metadata)
            await runner.run(
                snapshot,
                RunOptions(
                    as_of=DAY + timedelta(days=settings.ingest.default_keep_days + 1),
                    force=True,
                    scope=inventory.Filter(kind="audit", owner_ids=frozenset({table.owner_id})),
                ),
            )
    finally:
        await shard_pools.close()
        await metadata.close()
    return results


def targets(results: dict[str, Any], sizes: list[int]) -> dict[str, Any]:
    drop = results["drop"]
    largest = max(drop[str(s)]["median_s"] for s in sizes)
    growth = drop[str(sizes[-1])]["median_s"] / drop[str(sizes[0])]["median_s"]
    return {
        "drop_max_seconds": verdict(round(largest, 3), 1.0),
        "drop_growth_10x_rows": verdict(round(growth, 2), 2.0) | {"sizes": [sizes[0], sizes[-1]]},
        # What is left of the drop once the kernel's release of the same bytes on the same
        # filesystem (measured beside it) is taken away: shardlog's and PostgreSQL's share.
        "drop_beyond_file_release_ms": {
            str(s): round((drop[str(s)]["median_s"] - drop[str(s)]["plain_file_release_s"]) * 1e3)
            for s in sizes
        },
        "delete_vs_drop_at_largest": round(
            results["delete_vacuum"][str(sizes[-1])]["median_s"] / drop[str(sizes[-1])]["median_s"],
            1,
        ),
    }


def plot(results: dict[str, Any], sizes: list[int]) -> Any:
    def draw(figure: Any) -> None:
        labels = [f"{s / 1e6:g}M" for s in sizes]
        for index, (metric, unit, scale) in enumerate(
            (("median_s", "seconds", 1.0), ("wal_bytes", "WAL MiB", 2**20))
        ):
            axes = figure.add_subplot(1, 2, index + 1)
            width = 0.38
            positions = range(len(sizes))
            for offset, name in ((-width / 2, "drop"), (width / 2, "delete_vacuum")):
                values = [results[name][str(s)][metric] / scale for s in sizes]
                axes.bar([p + offset for p in positions], values, width, label=name)
            axes.set_xticks(list(positions), labels)
            axes.set_yscale("log")
            axes.set_ylabel(unit)
            axes.set_xlabel("rows in the day (12 shards)")
            axes.legend()
        figure.suptitle("expiring one day: retention DROP vs DELETE + VACUUM")

    return draw


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000000,5000000,10000000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    data_dir = Path("var/bench-retention")
    settings = bench_settings(data_dir)
    try:
        with bench_cluster(settings, with_router=False):
            results = asyncio.run(measure(settings, sizes, args.repeats, data_dir))
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    found = targets(results, sizes)
    print(f"targets: {found}")
    write_results(
        "retention",
        {
            "sizes": sizes,
            "repeats": args.repeats,
            "content_chars": CONTENT,
            "results": results,
            "targets": found,
        },
        plot(results, sizes),
        mode=mode_of(parser, args),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
