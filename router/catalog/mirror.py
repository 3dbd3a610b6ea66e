"""A shard's mirror of the catalog's owners (``shard_owners``, schema/shard/0014_shard_owners.sql;
docs/architecture.md, "Shared tables for small owners"): the tenant and key of each owner with
rows on the shard, which a search of a prefix or of no owner holds its shared rows to. The one
writer of its rows: a shared write (in its own transaction) and a remap (after its catalog
commit, on every shard the owner has rows on) call ``write_mirror``; an erase that forgets the
owner calls ``forget``."""

from __future__ import annotations

import logging
from collections.abc import Iterable

import asyncpg

from router.catalog import store
from router.catalog.snapshot import OwnerMapping
from router.catalog.store import Executor
from router.db.pools import ShardPools
from router.errors import Unavailable

log = logging.getLogger(__name__)

# How long after a remap its owner's mirrors are corrected again by every reader that relies
# on them (``settle``): a write that resolved the owner just before the remap may still add
# its mirror row on a new shard with the old tenant (a write inserts, never corrects), and
# writes end well within this.
SETTLE_S = 60.0


async def write_mirror(
    shard: Executor, owners: Iterable[OwnerMapping], *, correct: bool = True
) -> None:
    """Make the shard's mirror rows of ``owners`` say what their mappings say (inserted, or
    corrected when a remap changed the tenant or key). Rows already right are not touched.
    Not ``correct`` (a write, whose mapping may be a moment older than a remap): rows that
    exist are left as they are; correcting them is the remap's."""
    unique = {(o.kind, o.id): o for o in owners}
    if not unique:
        return
    on_conflict = (
        "DO UPDATE SET tenant = EXCLUDED.tenant, key = EXCLUDED.key "
        "WHERE (shard_owners.tenant, shard_owners.key) IS DISTINCT FROM "
        "(EXCLUDED.tenant, EXCLUDED.key)"
        if correct
        else "DO NOTHING"
    )
    await shard.execute(
        "INSERT INTO shard_owners (kind, owner_id, tenant, key) "
        "SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[]) "
        f"ON CONFLICT (kind, owner_id) {on_conflict}",
        [o.kind for o in unique.values()],
        [o.id for o in unique.values()],
        [o.tenant for o in unique.values()],
        [o.key for o in unique.values()],
    )


async def forget(shard: Executor, kind: str, owner_id: int) -> None:
    """Take a forgotten owner's key out of the shard's mirror, one owner at a time through
    the function of schema/shard/0015 (the writer may not delete from the mirror itself)."""
    await shard.execute("SELECT shardlog_forget_owner($1, $2)", kind, owner_id)


async def mirrored_shards(metadata: Executor, owner: OwnerMapping) -> list[str]:
    """The shards an owner has shared rows on (``owner_shards``): where its mirror rows are."""
    rows = await metadata.fetch(
        "SELECT shard FROM owner_shards WHERE kind = $1 AND owner_id = $2 ORDER BY shard",
        owner.kind,
        owner.id,
    )
    return [row["shard"] for row in rows]


async def remirror(metadata: Executor, pools: ShardPools, owner: OwnerMapping) -> list[str]:
    """After a remap's catalog commit: correct the owner's mirror rows on each of its shards.
    Best effort: a shard that cannot be reached is logged and returned (its stale row fails
    pages with a 503 until the owner is mapped again, as it is, which repairs it; no row of
    it reaches a foreign token meanwhile, the router checks every page's owners)."""
    missed = []
    for shard in await mirrored_shards(metadata, owner):
        try:
            await write_mirror(pools.writer(shard), [owner])
        except (OSError, Unavailable, asyncpg.PostgresError, asyncpg.InterfaceError) as failure:
            log.warning(
                "owner mirror of %s owner %d not updated on shard %s (%s): its pages of a "
                "prefix or no owner answer 503 until it is repaired",
                owner.kind,
                owner.id,
                shard,
                failure,
            )
            missed.append(shard)
    if not missed:
        await metadata.execute(
            "DELETE FROM mirror_pending WHERE kind = $1 AND owner_id = $2 "
            "AND recorded_at < now() - make_interval(secs => $3)",
            owner.kind,
            owner.id,
            SETTLE_S,
        )
    return missed


async def settle(
    metadata: Executor, pools: ShardPools, kind: str, shards: Iterable[str]
) -> list[int]:
    """Correct the mirrors that a remap left to correct (``mirror_pending``, recorded in the
    remap's catalog transaction) before a reader relies on them, on ``shards`` (those a reader
    reads: active and draining) and on those the owners' ``owner_shards`` rows name: the
    owners of ``kind`` whose mirrors are still wrong on some shard (unreachable), by id; empty
    when all are right. A forgotten owner (no mapping) has no mirror row left to correct."""
    shards = sorted(shards)
    pending = [
        row["owner_id"]
        for row in await metadata.fetch(
            "SELECT owner_id FROM mirror_pending WHERE kind = $1 ORDER BY owner_id", kind
        )
    ]
    if not pending:
        return []
    mappings = await store.owners_by_id(metadata, kind, pending)
    left = []
    for ident in pending:
        mapping = mappings.get(ident)
        if mapping is None:
            await metadata.execute(
                "DELETE FROM mirror_pending WHERE kind = $1 AND owner_id = $2", kind, ident
            )
            continue
        missed = await correct_everywhere(pools, shards, mapping)
        if missed or await remirror(metadata, pools, mapping):
            left.append(ident)
    return left


async def correct_everywhere(
    pools: ShardPools, shards: Iterable[str], owner: OwnerMapping
) -> list[str]:
    """Correct the owner's mirror row on each of ``shards`` that holds one, not only on those
    its ``owner_shards`` rows name (a reader relies on every shard's mirror; an update of a
    row that is right, or absent, changes nothing). The shards that could not be reached."""
    missed = []
    for shard in shards:
        try:
            await pools.writer(shard).execute(
                "UPDATE shard_owners SET tenant = $3, key = $4 WHERE kind = $1 AND owner_id = $2 "
                "AND (tenant, key) IS DISTINCT FROM ($3, $4)",
                owner.kind,
                owner.id,
                owner.tenant,
                owner.key,
            )
        except (OSError, Unavailable, asyncpg.PostgresError, asyncpg.InterfaceError) as failure:
            log.warning(
                "owner mirror of %s owner %d not corrected on shard %s (%s)",
                owner.kind,
                owner.id,
                shard,
                failure,
            )
            missed.append(shard)
    return missed
