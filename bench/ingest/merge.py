"""The fair peer of REST flows in bench/ingest: the flow write path's own SQL straight from
Python (bench/merge_peer.py: binary COPY into the staging table and ddl.flow_merge_sql's
``INSERT ... ON CONFLICT`` merge into the day table, shards in parallel), run head to head with
REST flows on the same rows, and the merge's own PostgreSQL cost per row.

Same rows, same part size: a REST request of ``batch`` rows over S switches is split into
parts per (switch, shard of its group), so the peer writes batches of batch / (S x group
width) rows per shard; both write the same rows again on every pair, so after the first pair
both merge into existing rows (the conflict path), as a day's repeated flows do.
"""

from __future__ import annotations

import asyncio
import ipaddress
import statistics
import time
from datetime import datetime
from typing import Any

from bench.harness import send
from bench.ingest import generate
from bench.merge_peer import MergePeer, Staged, dealt, staged_flow

TARGET = 0.5


def staged_rows(records: list[dict[str, Any]]) -> list[Staged]:
    """REST flow records as the router stages them (first_seen = last_seen = ts)."""
    rows = []
    for r in records:
        ts = datetime.fromisoformat(r["ts"])
        rows.append(
            staged_flow(
                ipaddress.ip_address(r["src_ip"]).packed,
                ipaddress.ip_address(r["dst_ip"]).packed,
                r["src_port"],
                r["dst_port"],
                r["bytes"],
                r["packets"],
                ts,
                ts,
                r["proto"],
            )
        )
    return rows


def part_rows(batch: int, switches: int, shards: int, groups: int) -> int:
    return max(1, batch // (switches * max(1, shards // groups)))


async def merge_costs(dsns: list[str], by_shard: list[list[Staged]], batch: int) -> dict[str, Any]:
    """Backend CPU per row of staging and of the merge, into a new day table (every key new:
    the insert path) and then again with the same rows (every key present: the update path)."""
    peer = MergePeer(dsns)
    await peer.open()
    peer.account = True
    rows = sum(len(r) for r in by_shard)
    costs: dict[str, Any] = {}
    try:
        for path in ("new_keys", "existing_keys"):
            peer.stage_cpu_s = peer.merge_cpu_s = 0.0
            seconds = await peer.write(by_shard, batch)
            costs[path] = {
                "stage_us_per_row": round(peer.stage_cpu_s / rows * 1e6, 2),
                "merge_us_per_row": round(peer.merge_cpu_s / rows * 1e6, 2),
                "rows_per_s": round(rows / seconds),
            }
    finally:
        await peer.close()
    return costs


def head_to_head(
    url: str,
    cluster: Any,
    records: list[dict[str, Any]],
    config: dict[str, int],
    pairs: int,
    switches: int,
    groups: int,
) -> dict[str, Any]:
    """REST flows (best configuration) and the merge peer alternated ``pairs`` times; the median
    of the pairwise ratios; then the merge's own cost per row."""
    dsns = [shard.spec.dsn() for shard in cluster.shards]
    batch = part_rows(config["batch"], switches, len(dsns), groups)
    by_shard = dealt(staged_rows(records), len(dsns))
    bodies = generate.ndjson_bodies(records, config["batch"])
    rest_rates: list[float] = []
    peer_rates: list[float] = []

    async def run() -> dict[str, Any]:
        peer = MergePeer(dsns)
        await peer.open()
        try:
            for _ in range(pairs):
                started = time.perf_counter()
                await send(url, "/v1/flows", bodies, config["clients"])
                rest_rates.append(len(records) / (time.perf_counter() - started))
                peer_rates.append(len(records) / await peer.write(by_shard, batch))
        finally:
            await peer.close()
        return await merge_costs(dsns, by_shard, batch)

    costs = asyncio.run(run())
    ratios = [r / p for r, p in zip(rest_rates, peer_rates, strict=True)]
    print(
        f"  head to head flows vs merge peer (parts of {batch} rows): REST "
        f"{statistics.median(rest_rates):,.0f} rows/s, peer {statistics.median(peer_rates):,.0f} "
        f"rows/s, ratio median {statistics.median(ratios):.3f} of {[round(r, 3) for r in ratios]}",
        flush=True,
    )
    for path, cost in costs.items():
        print(
            f"  merge cost, {path}: staging {cost['stage_us_per_row']} us/row, merge "
            f"{cost['merge_us_per_row']} us/row of shard backend CPU ({cost['rows_per_s']:,} "
            "rows/s)",
            flush=True,
        )
    return {
        "config": config,
        "peer_part_rows": batch,
        "rest_rows_per_s": [round(r) for r in rest_rates],
        "peer_rows_per_s": [round(r) for r in peer_rates],
        "ratios": [round(r, 3) for r in ratios],
        "median_ratio": statistics.median(ratios),
        "postgres_cpu": costs,
    }
