"""bench/ingest/placement: how evenly an owner-day's rows lie on the shards it is spread over
after 100+ mixed requests (1-12 owners each, 1-50 or 51-1,500 rows per owner) posted through
the router of a 12-shard, 2-group cluster: owners mapped by hand (the whole 6-shard group) and
owners of spread 2. Rows per shard are counted on the
shards. "Before" is the dealing the router used until now (placement.deal: one round-robin over
a shuffled order per request) replayed on the same requests. Target: every shard of an owner-day
holds within +/-10 % of an equal share. Writes bench/results/placement.{json,png}.

    python -m bench.ingest.placement [--requests 150] [--owners 12]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.harness import (
    BENCH_BASE_PORT,
    BENCH_ROUTER_PORT,
    auth_for,
    bench_cluster,
    bench_settings,
    grouped_bars,
    send,
    verdict,
    write_results,
)
from bench.search.shards import shard_connections
from bench.shard_view import owner_id
from bench.stamps import mode_of
from router.catalog import store, tables
from router.db import catalog_login
from router.routing import placement
from router.settings import IngestSettings

GROUP = "group1"
TARGET_DEVIATION = 0.10
# The spread owners' width: at least 2, so that there is a balance to measure (the default,
# SHARDLOG_INGEST__SPREAD_MIN_SHARDS, may be 1).
SPREAD = max(2, IngestSettings().spread_min_shards)
Request = list[tuple[str, int]]


def mixed_requests(owners: list[str], count: int, seed: int) -> list[Request]:
    generator = random.Random(seed)
    return [
        [
            (owner, generator.choice([generator.randint(1, 50), generator.randint(51, 1_500)]))
            for owner in generator.sample(
                owners, generator.randint(max(1, len(owners) // 2), len(owners))
            )
        ]
        for _ in range(count)
    ]


def body(request: Request, number: int) -> bytes:
    return b"".join(
        orjson.dumps({"owner": owner, "content": f"r{number} {owner} {i} " + "abcdef " * 12})
        + b"\n"
        for owner, rows in request
        for i in range(rows)
    )


def old_dealing(
    requests: list[Request], ids: dict[str, int], shards: list[str]
) -> dict[str, Counter[str]]:
    """Rows per shard of each owner as the router dealt them before the spread width."""
    batch_rows = IngestSettings().batch_rows
    held: dict[str, Counter[str]] = {owner: Counter() for owner in ids}
    for number, request in enumerate(requests):
        rows: Counter[str] = Counter()
        for owner, count in request:
            rows[owner] += count
        parts: dict[str, tuple[str, int]] = {}
        for owner in sorted(rows, key=lambda o: ids[o]):
            for index, span in enumerate(placement.split(rows[owner], batch_rows, len(shards))):
                parts[f"{owner}:{index}"] = (owner, len(span))
        for part, shard in placement.deal(
            list(parts), shards, placement.rng_for(str(number))
        ).items():
            owner, count = parts[part]
            held[owner][shard] += count
    return held


async def on_shards(settings: Any, ids: dict[str, int]) -> dict[str, Counter[str]]:
    """Rows per shard of each owner's day tables, counted on the shards."""
    by_id = {ident: owner for owner, ident in ids.items()}
    held: dict[str, Counter[str]] = {owner: Counter() for owner in ids}
    async with shard_connections(settings) as shards:
        for name, connection in shards.connections.items():
            for table in await tables.on_shard(connection):
                if table.kind == "audit" and table.owner_id in by_id:
                    held[by_id[table.owner_id]][name] += await connection.fetchval(
                        f"SELECT count(*) FROM {table.quoted}"
                    )
    return held


def deviation(counts: Counter[str], shards: list[str]) -> float:
    """The largest distance of a shard's rows from an equal share, as a share of it."""
    share = sum(counts.values()) / len(shards)
    return max(abs(counts[shard] - share) for shard in shards) / share


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=150)
    parser.add_argument("--owners", type=int, default=12)
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument("--base-port", type=int, default=BENCH_BASE_PORT)
    parser.add_argument("--router-port", type=int, default=BENCH_ROUTER_PORT)
    args = parser.parse_args(argv)
    data_dir = Path(tempfile.mkdtemp(prefix="shardlog-placement-"))
    settings = bench_settings(data_dir, base_port=args.base_port, router_port=args.router_port)
    tag = random.Random().randrange(16**6)
    whole = [f"place-{tag:06x}-whole-{n}" for n in range(args.owners // 2)]
    spread = [f"place-{tag:06x}-spread-{n}" for n in range(args.owners - len(whole))]
    requests = mixed_requests(whole + spread, args.requests, args.seed)
    try:
        with bench_cluster(settings) as (_, router):
            assert router is not None
            api = httpx.Client(base_url=router.url, headers=auth_for(router.url), timeout=60)
            # Mapped by hand: the whole group, as every owner was before; then the spread owners
            # get the spread new owners get.
            for owner in whole + spread:
                mapped = api.put(
                    "/v1/admin/owners",
                    json={"kind": "audit", "key": owner, "group": GROUP, "tenant": "system"},
                )
                mapped.raise_for_status()
            asyncio.run(set_spreads(settings, spread, SPREAD))
            bodies = [body(request, number) for number, request in enumerate(requests)]
            asyncio.run(send(router.url, "/v1/audit", bodies, clients=4))
            ids = {owner: owner_id(api, "audit", owner) or 0 for owner in whole + spread}
            shards = sorted(
                s["name"] for s in api.get("/v1/admin/shards").json() if s["group"] == GROUP
            )
            after = asyncio.run(on_shards(settings, ids))
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    before = old_dealing(requests, ids, shards)
    rows: list[dict[str, Any]] = []
    for owner in whole + spread:
        width = None if owner in whole else SPREAD
        subset = placement.spread_shards(ids[owner], shards, width, set(shards))
        batch_rows = IngestSettings().batch_rows
        largest = max(
            len(span)
            for request in requests
            for key, count in request
            if key == owner
            for span in placement.split(count, batch_rows, len(subset))
        )
        share = sum(after[owner].values()) / len(subset)
        rows.append(
            {
                "owner": owner,
                "spread": len(subset),
                "requests": sum(1 for request in requests if owner in dict(request)),
                "rows": sum(after[owner].values()),
                "shards_used": sorted(after[owner]),
                "worst_share_after": round(
                    max(after[owner].values()) / sum(after[owner].values()), 4
                ),
                "deviation_after": round(deviation(after[owner], subset), 4),
                "worst_share_before": round(
                    max(before[owner].values()) / sum(before[owner].values()), 4
                ),
                "deviation_before": round(deviation(before[owner], shards), 4),
                # Dealing to the emptiest shard keeps every shard within one part of the others:
                # the deviation's bound is (largest part) x (spread - 1) / spread, per share.
                "bound": round(largest * (len(subset) - 1) / len(subset) / share, 4),
            }
        )
    measured = [row for row in rows if row["requests"] >= 100]
    worst = max(row["deviation_after"] for row in measured)
    payload = {
        "params": {
            "requests": args.requests,
            "owners": args.owners,
            "seed": args.seed,
            "group_shards": len(shards),
        },
        "owners": rows,
        "worst_deviation_after": worst,
        "worst_deviation_before": max(row["deviation_before"] for row in measured),
        "largest_bound": max(row["bound"] for row in measured),
        "targets": {"owner_day_deviation_from_equal_share": verdict(worst, TARGET_DEVIATION)},
    }
    write_results(
        "placement", payload, lambda figure: plot(figure, rows), mode=mode_of(parser, args)
    )
    print(
        f"{'owner':<34} {'spread':>6} {'reqs':>5} {'rows':>8} "
        f"{'worst before':>13} {'worst after':>12}"
    )
    for row in rows:
        print(
            f"{row['owner']:<34} {row['spread']:>6} {row['requests']:>5} {row['rows']:>8} "
            f"{row['worst_share_before']:>13.3f} {row['worst_share_after']:>12.3f}"
        )
    print(
        f"largest deviation from an equal share, owner-days with >= 100 requests: before "
        f"{payload['worst_deviation_before']:.1%}, after {worst:.1%} (target <= 10 %)"
    )
    if worst > TARGET_DEVIATION:
        bound = max(row["bound"] for row in measured)
        print(
            f"SHORTFALL: an owner-day deviates {worst:.1%} from an equal share (target 10 %); "
            f"parts are not cut smaller, and one part of these requests is up to {bound:.1%} "
            "of a share (spread over the other shards): the bound of dealing whole parts"
        )
        return 1
    return 0


async def set_spreads(settings: Any, owners: list[str], spread: int) -> None:
    connection = await catalog_login.connect(settings)
    try:
        for owner in owners:
            await store.set_spread(connection, "audit", owner, spread)
    finally:
        await connection.close()


def plot(figure: Any, rows: list[dict[str, Any]]) -> None:
    axes = figure.add_subplot(1, 1, 1)
    grouped_bars(
        axes,
        [f"{row['owner'].rsplit('-', 2)[-2]}-{row['owner'].rsplit('-', 1)[-1]}" for row in rows],
        {
            "before: deviation from an equal share": [
                row["deviation_before"] * 100 for row in rows
            ],
            "after": [row["deviation_after"] * 100 for row in rows],
        },
    )
    axes.axhline(TARGET_DEVIATION * 100, color="red", linestyle="--", label="target 10 %")
    axes.set_ylabel("largest deviation of a shard from an equal share (%)")
    axes.set_title("owner-day rows per shard after mixed requests (6-shard group)")
    axes.legend()


if __name__ == "__main__":
    sys.exit(main())
