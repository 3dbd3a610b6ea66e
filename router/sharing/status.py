"""What the shards hold in their shared tables of a day (GET /v1/admin/sharing): per shard and
kind, whether the table was made, its owner-days written and promoted, its rows (the planner's
estimate: a count would read the whole day) and bytes. Shards in parallel; one that does not
answer is named, not fatal."""

from __future__ import annotations

import asyncio
from datetime import date
from typing import Any

from router.catalog.snapshot import CatalogSnapshot
from router.db.failures import DRIVER_ERRORS, describe
from router.db.names import Kind, owner_days_table, quote_ident, shared_table
from router.db.pools import ShardPools
from router.errors import Unavailable

_KINDS: tuple[Kind, ...] = ("audit", "flow")


async def _of_shard(pools: ShardPools, shard: str, day: date) -> list[dict[str, Any]]:
    fence = quote_ident(owner_days_table(day))
    found = []
    async with pools.reader(shard, primary=True).acquire() as connection:
        has_fence = await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", fence)
        for kind in _KINDS:
            table = quote_ident(shared_table(kind, day))
            entry: dict[str, Any] = {
                "shard": shard,
                "day": day,
                "kind": kind,
                "exists": False,
                "owner_days": 0,
                "promoted": 0,
                "rows": None,
                "bytes": 0,
            }
            stats = await connection.fetchrow(
                "SELECT c.reltuples::bigint AS rows, pg_total_relation_size(c.oid) AS bytes "
                "FROM pg_class c WHERE c.oid = to_regclass($1)",
                table,
            )
            if stats is not None:
                entry["exists"] = True
                entry["rows"] = stats["rows"] if stats["rows"] >= 0 else None
                entry["bytes"] = stats["bytes"]
            if has_fence:
                counts = await connection.fetchrow(
                    f"SELECT count(*) FILTER (WHERE NOT promoted) AS written, "
                    f"count(*) FILTER (WHERE promoted) AS promoted FROM {fence} WHERE kind = $1",
                    kind,
                )
                assert counts is not None
                entry["owner_days"], entry["promoted"] = counts["written"], counts["promoted"]
            found.append(entry)
    return found


async def sharing_status(pools: ShardPools, snapshot: CatalogSnapshot, day: date) -> dict[str, Any]:
    shards = sorted(n for n, s in snapshot.shards.items() if s.state != "down")
    results = await asyncio.gather(
        *(_of_shard(pools, shard, day) for shard in shards), return_exceptions=True
    )
    shard_days: list[dict[str, Any]] = []
    unreachable: dict[str, str] = {}
    for shard, result in zip(shards, results, strict=True):
        if isinstance(result, BaseException):
            if not isinstance(result, (*DRIVER_ERRORS, Unavailable)):
                raise result
            unreachable[shard] = describe(result)
            continue
        shard_days.extend(result)
    return {"day": day, "shard_days": shard_days, "unreachable": unreachable}
