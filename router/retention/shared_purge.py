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
from router.compaction import repack
from router.compaction.pace import Pace
from router.db.connection import Connection
from router.db.failures import DRIVER_ERRORS, describe
from router.db.names import Kind, quote_ident, shared_table
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
    metadata: asyncpg.Pool,
    kind: OwnerKind,
    owner_id: int,
    before: date | None,
    first: date | None = None,
    shard: str | None = None,
) -> list[SharedDayOfShard]:
    """The shard-days whose shared table may hold the owner's rows, of the days from
    ``first`` and before ``before`` (either open: None): the registered shared tables of the
    shards it has shared rows on (or ``shard`` alone), from the first day recorded there."""
    rows = await metadata.fetch(
        "SELECT t.shard, t.day FROM owner_shards AS o JOIN shared_tables AS t "
        "ON t.kind = o.kind AND t.shard = o.shard AND t.day >= o.since "
        "WHERE o.kind = $1 AND o.owner_id = $2 AND ($3::date IS NULL OR t.day < $3) "
        "AND ($4::date IS NULL OR t.day >= $4) AND ($5::text IS NULL OR t.shard = $5) "
        "ORDER BY t.day, t.shard",
        kind,
        owner_id,
        before,
        first,
        shard,
    )
    return [SharedDayOfShard(row["shard"], row["day"]) for row in rows]


async def _purge_table(
    connection: Connection, kind: OwnerKind, day: date, owner_id: int, batch: int, throttle: Pace
) -> int:
    """The owner's rows deleted from the shard-day's shared table, then from its shared
    segments if it is compacted (router/compaction/repack.py); the rows deleted."""
    table = shared_table(kind, day)
    exists = await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", quote_ident(table))
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
            break
    return purged + await repack.without_owner(connection, kind, day, owner_id, throttle)


async def owner_rows(connection: Connection, kind: Kind, day: date, owner_id: int) -> int:
    """The owner's rows in the shard's shared table of ``kind`` and ``day`` (an index-only
    count) and, when that shard-day is compacted, in its shared segments."""
    table = quote_ident(shared_table(kind, day))
    if not await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", table):
        return 0
    heap = int(await connection.fetchval(_LEFT_SQL.format(table=table), owner_id))
    return heap + await repack.owner_rows(connection, kind, day, owner_id)


def _by_shard(found: list[SharedDayOfShard]) -> dict[str, list[date]]:
    grouped: dict[str, list[date]] = {}
    for item in found:
        grouped.setdefault(item.shard, []).append(item.day)
    return dict(sorted(grouped.items()))


def _reachable(snapshot: CatalogSnapshot, shard: str) -> str | None:
    """Why a purge cannot go to ``shard`` (None: it can)."""
    known = snapshot.shards.get(shard)
    if known is None:
        return "unknown shard"
    return "the shard is marked down" if known.state == "down" else None


async def count_owner(
    metadata: asyncpg.Pool,
    pools: ShardPools,
    snapshot: CatalogSnapshot,
    kind: OwnerKind,
    owner_id: int,
    before: date | None,
    first: date | None = None,
    shard: str | None = None,
) -> Purge:
    """What a purge of the same days would delete, counted and not deleted (a dry run): each
    shard-day with rows of the owner in ``remaining``."""
    found = await shared_days_of(metadata, kind, owner_id, before, first, shard)
    return await _each_shard_day(pools, snapshot, kind, owner_id, found, None)


async def purge_owner(
    metadata: asyncpg.Pool,
    pools: ShardPools,
    snapshot: CatalogSnapshot,
    settings: SharedSettings,
    kind: OwnerKind,
    owner_id: int,
    before: date | None = None,
    first: date | None = None,
    shard: str | None = None,
) -> Purge:
    """Delete the owner's rows of the days from ``first`` and before ``before`` (open ends:
    None) from the shared tables of its shards (or ``shard`` alone); then count what is left
    (rows written meanwhile are left, and said to be)."""
    found = await shared_days_of(metadata, kind, owner_id, before, first, shard)
    deleting = (settings.delete_batch_rows, Pace(settings.delete_max_rows_per_s))
    return await _each_shard_day(pools, snapshot, kind, owner_id, found, deleting)


async def _each_shard_day(
    pools: ShardPools,
    snapshot: CatalogSnapshot,
    kind: OwnerKind,
    owner_id: int,
    found: list[SharedDayOfShard],
    deleting: tuple[int, Pace] | None,
) -> Purge:
    """On each shard, one connection: each shard-day's rows of the owner deleted (with
    ``deleting``: its batch size and pace; as the writer), then counted."""
    purge = Purge()
    for name, days in _by_shard(found).items():
        why = _reachable(snapshot, name)
        if why is not None:
            purge.unreachable[name] = why
            continue
        pool = pools.writer(name) if deleting else pools.reader(name, primary=True)
        try:
            async with pool.acquire() as connection:
                for day in days:
                    table = shared_table(kind, day)
                    entry = {"kind": kind, "day": day.isoformat(), "shard": name, "table": table}
                    if deleting is not None:
                        batch, pace = deleting
                        rows = await _purge_table(connection, kind, day, owner_id, batch, pace)
                        purge.purged.append({**entry, "rows": rows})
                    left = await owner_rows(connection, kind, day, owner_id)
                    if left:
                        purge.remaining.append({**entry, "rows": left})
        except DRIVER_ERRORS as exc:
            log.warning("purge of %s owner id %s on %s: %s", kind, owner_id, name, exc)
            purge.unreachable[name] = describe(exc)
    return purge
