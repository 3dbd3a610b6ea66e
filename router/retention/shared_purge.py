"""An owner's rows taken out of the shared tables of its shards (docs/architecture.md,
"Retention, erase, archive", "Erase"): a shared table is every small owner's, so an erase
cannot drop it; it deletes the owner's rows in batches, each its own short transaction, at a
bounded rate, on each shard the catalog's owner_shards lists, then counts what is left.

The writer deletes (as the promotion's move does): the retention role may drop day tables
and never deletes rows."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import asyncpg

from router.catalog.snapshot import CatalogSnapshot, OwnerKind
from router.catalog.store import Executor
from router.compaction.pace import Pace
from router.db.failures import DRIVER_ERRORS, describe
from router.db.names import quote_ident, shared_table
from router.db.pools import ShardPools
from router.settings import SharedSettings

log = logging.getLogger(__name__)

_BATCH_SQL = (
    "DELETE FROM {table} WHERE ctid = ANY (ARRAY(SELECT ctid FROM {table} "
    "WHERE owner_id = $1 LIMIT $2))"
)
_LEFT_SQL = "SELECT count(*) FROM {table} WHERE owner_id = $1"


@dataclass(frozen=True)
class SharedDayOfShard:
    shard: str
    day: date


@dataclass
class Purge:
    """What an owner's purge took out of each shared table, what is left, and the shards it
    could not reach."""

    purged: list[dict[str, Any]] = field(default_factory=list)
    remaining: list[dict[str, Any]] = field(default_factory=list)
    unreachable: dict[str, str] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return sum(int(entry["rows"]) for entry in self.purged)


async def shared_days_of(
    metadata: asyncpg.Pool, kind: OwnerKind, owner_id: int, before: date | None
) -> list[SharedDayOfShard]:
    """The shard-days whose shared table may hold the owner's rows: the registered shared
    tables of the shards it has shared rows on, from the first day recorded there."""
    rows = await metadata.fetch(
        "SELECT t.shard, t.day FROM owner_shards AS o JOIN shared_tables AS t "
        "ON t.kind = o.kind AND t.shard = o.shard AND t.day >= o.since "
        "WHERE o.kind = $1 AND o.owner_id = $2 AND ($3::date IS NULL OR t.day < $3) "
        "ORDER BY t.day, t.shard",
        kind,
        owner_id,
        before,
    )
    return [SharedDayOfShard(row["shard"], row["day"]) for row in rows]


async def _purge_table(
    connection: Executor, table: str, owner_id: int, batch: int, throttle: Pace
) -> int:
    exists = await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", table)
    if not exists:
        return 0
    statement = _BATCH_SQL.format(table=quote_ident(table))
    purged = 0
    while True:
        status = await connection.execute(statement, owner_id, batch)
        taken = int(status.rsplit(" ", 1)[1])
        purged += taken
        await throttle.copied(taken)
        if taken < batch:
            return purged


async def _left(connection: Executor, table: str, owner_id: int) -> int:
    if not await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", table):
        return 0
    return int(await connection.fetchval(_LEFT_SQL.format(table=quote_ident(table)), owner_id))


async def purge_owner(
    metadata: asyncpg.Pool,
    pools: ShardPools,
    snapshot: CatalogSnapshot,
    settings: SharedSettings,
    kind: OwnerKind,
    owner_id: int,
    before: date | None = None,
) -> Purge:
    """Delete the owner's rows of the days before ``before`` (every day: None) from the
    shared tables of its shards; then count what is left (rows written meanwhile are left and
    said to be)."""
    purge = Purge()
    throttle = Pace(settings.delete_max_rows_per_s)
    by_shard: dict[str, list[date]] = {}
    for found in await shared_days_of(metadata, kind, owner_id, before):
        by_shard.setdefault(found.shard, []).append(found.day)
    for shard, days in sorted(by_shard.items()):
        known = snapshot.shards.get(shard)
        if known is None or known.state == "down":
            purge.unreachable[shard] = "the shard is marked down" if known else "unknown shard"
            continue
        try:
            async with pools.writer(shard).acquire() as connection:
                for day in days:
                    table = shared_table(kind, day)
                    rows = await _purge_table(
                        connection, table, owner_id, settings.delete_batch_rows, throttle
                    )
                    entry = {"kind": kind, "day": day.isoformat(), "shard": shard}
                    purge.purged.append({**entry, "table": table, "rows": rows})
                    left = await _left(connection, table, owner_id)
                    if left:
                        purge.remaining.append({**entry, "table": table, "rows": left})
        except DRIVER_ERRORS as exc:
            log.warning("purge of %s owner id %s on %s: %s", kind, owner_id, shard, exc)
            purge.unreachable[shard] = describe(exc)
    return purge
