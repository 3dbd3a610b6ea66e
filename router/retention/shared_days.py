"""The shared days retention sees (docs/architecture.md, "Retention, erase, archive"): per
shard and day, the shared tables and the owner_days table the shard holds, read from its
pg_class by name (a handful of relations per shard-day whatever its owners: the cost of a
listing is linear in days x shards), with the shard-days the metadata's shared_tables
registers; and which of them a run drops (pure: previewed by the dry run)."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import asyncpg

from router.catalog.snapshot import CatalogSnapshot
from router.db.failures import DRIVER_ERRORS, describe
from router.db.names import (
    Kind,
    SharedRelation,
    owner_days_table,
    parse_shared_table,
    shared_table,
    shared_table_regex,
)
from router.db.pools import ShardPools
from router.retention.inventory import RELATIONS_SQL, Filter
from router.retention.plan import first_kept

KINDS: tuple[Kind, ...] = ("audit", "flow")


@dataclass
class SharedDay:
    """One shard-day: the shared relations its shard holds, their bytes, the owner-days its
    owner_days table lists (estimated), and the kinds the registry lists."""

    shard: str
    group: str
    day: date
    relations: set[SharedRelation] = field(default_factory=set)
    bytes: int = 0
    owner_days: int = 0
    registered: set[Kind] = field(default_factory=set)


def relation_name(relation: SharedRelation, day: date) -> str:
    return owner_days_table(day) if relation == "owner_days" else shared_table(relation, day)


async def _on_shard(pools: ShardPools, shard: str) -> list[asyncpg.Record]:
    async with pools.reader(shard, primary=True).acquire() as connection:
        rows: list[asyncpg.Record] = await connection.fetch(RELATIONS_SQL, shared_table_regex())
        return rows


async def take(
    metadata: asyncpg.Pool, pools: ShardPools, snapshot: CatalogSnapshot, wanted: Filter
) -> tuple[list[SharedDay], dict[str, str]]:
    """The shard-days of the shards not marked down that the run's scope covers, ordered by
    (day, shard); and the shards that could not be read. A scope of owners covers none: a
    shared day is every small owner's."""
    if wanted.owner_ids is not None:
        return [], {}
    shards = sorted(
        name
        for name, shard in snapshot.shards.items()
        if shard.state != "down"
        and (wanted.shard is None or name == wanted.shard)
        and (wanted.group is None or shard.group == wanted.group)
    )
    registry = await metadata.fetch("SELECT kind, day, shard FROM shared_tables")
    listings = await asyncio.gather(
        *(_on_shard(pools, shard) for shard in shards), return_exceptions=True
    )
    days: dict[tuple[str, date], SharedDay] = {}
    unreachable: dict[str, str] = {}

    def day_of(shard: str, day: date) -> SharedDay:
        return days.setdefault((shard, day), SharedDay(shard, snapshot.shards[shard].group, day))

    for shard, listing in zip(shards, listings, strict=True):
        if isinstance(listing, BaseException):
            if not isinstance(listing, DRIVER_ERRORS):
                raise listing
            unreachable[shard] = describe(listing)
            continue
        for record in listing:
            parsed = parse_shared_table(record["relname"])
            if parsed is None:
                continue
            relation, day = parsed
            entry = day_of(shard, day)
            entry.relations.add(relation)
            entry.bytes += record["bytes"]
            if relation == "owner_days":
                entry.owner_days = record["rows"]
    for row in registry:
        if row["shard"] in shards and row["shard"] not in unreachable:
            day_of(row["shard"], row["day"]).registered.add(row["kind"])
    found = [
        entry
        for entry in days.values()
        if (wanted.first is None or entry.day >= wanted.first)
        and (wanted.last is None or entry.day <= wanted.last)
    ]
    return sorted(found, key=lambda d: (d.day, d.shard)), unreachable


@dataclass(frozen=True)
class ExpiredShared:
    """What a run drops of one shard-day: the relations (those present) and the registry's
    kinds; the owner_days table only once no shared table of the day is left."""

    entry: SharedDay
    kinds: tuple[Kind, ...]
    relations: tuple[SharedRelation, ...]
    keep_days: dict[str, int]
    # The kinds whose group policy archives: their shared tables are archived before the drop.
    archive: tuple[Kind, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "day": self.entry.day.isoformat(),
            "shard": self.entry.shard,
            "group": self.entry.group,
            "kinds": list(self.kinds),
            "tables": [relation_name(r, self.entry.day) for r in self.relations],
            "owner_days": self.entry.owner_days,
            "bytes": self.entry.bytes,
            "keep_days": self.keep_days,
            "archive": [kind for kind in self.archive if kind in self.relations],
        }


def group_keep_days(
    snapshot: CatalogSnapshot, kind: Kind, group: str, default_keep_days: int
) -> int:
    """The group's policy of a kind (a shared day holds small owners: the group's policy is
    theirs), else the default."""
    for policy in snapshot.retention:
        if policy.kind == kind and policy.group == group and policy.owner_key is None:
            return policy.keep_days
    return default_keep_days


def group_archives(snapshot: CatalogSnapshot, kind: str, group: str) -> bool:
    """The group's policy of a kind archives its days (no group policy: it does not)."""
    return any(
        p.kind == kind and p.group == group and p.owner_key is None and p.archive
        for p in snapshot.retention
    )


def expired_shared(
    found: list[SharedDay],
    snapshot: CatalogSnapshot,
    as_of: date,
    real_today: date,
    default_keep_days: int,
    kind_scope: str | None,
) -> list[ExpiredShared]:
    """A kind's shared table of a day expires by its group's policy of that kind, as a day
    table of that kind would; the owner_days table (both kinds' fence) when every shared table
    of the day left on the shard goes in this run. Never a day of the real today or later."""
    plans = []
    for entry in found:
        if entry.day >= real_today:
            continue
        keep = {
            kind: group_keep_days(snapshot, kind, entry.group, default_keep_days) for kind in KINDS
        }
        expiring = {
            kind
            for kind in KINDS
            if (kind_scope is None or kind == kind_scope)
            and entry.day < first_kept(as_of, keep[kind])
        }
        relations: list[SharedRelation] = [
            k for k in KINDS if k in expiring and k in entry.relations
        ]
        left = {k for k in KINDS if k in entry.relations} - expiring
        if "owner_days" in entry.relations and not left and expiring:
            relations.append("owner_days")
        kinds = tuple(k for k in KINDS if k in expiring and k in entry.registered)
        if relations or kinds:
            archived = tuple(
                k for k in KINDS if k in relations and group_archives(snapshot, k, entry.group)
            )
            plans.append(
                ExpiredShared(
                    entry,
                    kinds,
                    tuple(relations),
                    {str(k): v for k, v in keep.items()},
                    archived,
                )
            )
    return plans


def weights(found: list[SharedDay], expired: list[ExpiredShared]) -> tuple[int, int]:
    """The day tables the shared days stand for (their owner-days), in the run's scope and
    among what it drops: what SHARDLOG_RETENTION__MAX_DROP_SHARE weighs them as."""
    total = sum(entry.owner_days for entry in found)
    return total, sum(item.entry.owner_days for item in expired)


def by_shard(expired: list[ExpiredShared]) -> dict[str, list[ExpiredShared]]:
    grouped: dict[str, list[ExpiredShared]] = defaultdict(list)
    for item in expired:
        grouped[item.entry.shard].append(item)
    return grouped
