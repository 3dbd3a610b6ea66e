"""What a closed day of small owners costs once compacted (issue 38, docs/architecture.md,
"Compacting shared days"): the shared layout's older remaining day (closed whatever the hour)
compacted by `shardlog sharing compact --clear-now`, and per owner-day the shared table's
bytes before, the shared table's and its shared segments' after, and the day's owner_days
bytes (kept either way; one row per owner and shard of its spread: ``owner_days_rows``), read
on every shard as the bootstrap superuser."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from datetime import date
from typing import Any

from bench.harness import cli_env
from router.catalog import store
from router.db import catalog_login, pools
from router.db.names import owner_days_table, quote_ident, shared_segment_table, shared_table
from router.settings import Settings

_SIZE = "SELECT coalesce(pg_total_relation_size(to_regclass($1)), 0)"


async def _day_sizes(settings: Settings, day: date) -> dict[str, int]:
    """The day's shared table, shared segments and owner_days bytes and its owner-days, summed
    over the shards."""
    metadata = await catalog_login.open_pool(settings)
    try:
        snapshot = await store.load_snapshot(metadata)
    finally:
        await metadata.close()
    relations = {
        "shared_table": quote_ident(shared_table("audit", day)),
        "shared_segments": shared_segment_table("audit", day),
        "owner_days": quote_ident(owner_days_table(day)),
    }
    found = dict.fromkeys([*relations, "owner_days_rows"], 0)
    for shard in snapshot.shards.values():
        connection = await pools.connect(shard.dsn, settings.pools)
        try:
            for part, relation in relations.items():
                found[part] += int(await connection.fetchval(_SIZE, relation))
            if await connection.fetchval(
                "SELECT to_regclass($1) IS NOT NULL", relations["owner_days"]
            ):
                found["owner_days_rows"] += int(
                    await connection.fetchval(
                        f"SELECT count(*) FROM {relations['owner_days']} WHERE kind = 'audit'"
                    )
                )
        finally:
            await connection.close()
    return found


def compact_day(settings: Settings, day: date, owners: int) -> dict[str, Any]:
    """The day of ``owners`` owners compacted (copy, switch, clear at once), timed, with its
    bytes per owner-day (an owner's rows of the day, on whichever shards of its spread) before
    and after."""
    before = asyncio.run(_day_sizes(settings, day))
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "router.cli",
            "sharing",
            "compact",
            "--day",
            day.isoformat(),
            "--clear-now",
            "--json",
        ],
        env=cli_env(settings),
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"sharing compact: {done.returncode} {done.stderr[-2000:]}")
    report = json.loads(done.stdout)["shard_days"]
    after = asyncio.run(_day_sizes(settings, day))
    owner_days = owners
    rows = sum(int(entry["rows"]) for entry in report)
    heap = before["shared_table"] / owner_days
    packed = (after["shared_table"] + after["shared_segments"]) / owner_days
    fence = after["owner_days"] / owner_days
    return {
        "day": day.isoformat(),
        "owner_days": owner_days,
        "owner_days_rows": before["owner_days_rows"],
        "rows": rows,
        "seconds": round(seconds, 2),
        "rows_per_s": round(rows / seconds, 1),
        "shard_days": len(report),
        "segments": sum(int(entry["segments"]) for entry in report),
        "heap_bytes_per_owner_day": round(heap, 1),
        "compacted_bytes_per_owner_day": round(packed, 1),
        "owner_days_bytes_per_owner_day": round(fence, 1),
        "closed_day_bytes_per_owner_day": round(packed + fence, 1),
    }
