"""What day tables the shards really hold, with their rows and size, joined with the owners
and the registry. Read from the shards themselves, so a table the registry lost is still
listed (and can still expire)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from datetime import date
from typing import Any

import asyncpg

from router.catalog.snapshot import CatalogSnapshot
from router.catalog.tables import DAY_TABLE_REGEX
from router.db.failures import DRIVER_ERRORS, describe
from router.db.names import DayTable, parse_day_table
from router.db.pools import ShardPools

_ERRORS = DRIVER_ERRORS

# Row counts come from the table statistics (cheap at any size); exact counts scan the table.
# $1: a regular expression of the relations' names.
RELATIONS_SQL = """
SELECT c.relname,
       greatest(coalesce(s.n_live_tup, 0), c.reltuples::bigint, 0) AS rows,
       pg_total_relation_size(c.oid) AS bytes
FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace AND c.relname ~ $1
"""


@dataclass(frozen=True)
class TableInfo:
    table: DayTable
    shard: str
    rows: int
    rows_exact: bool
    bytes: int
    owner: str | None  # None when the owner's mapping is gone
    group: str | None
    registered: bool
    hold_until: date | None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.table.kind,
            "owner": self.owner,
            "owner_id": self.table.owner_id,
            "group": self.group,
            "day": self.table.day.isoformat(),
            "shard": self.shard,
            "table": self.table.name,
            "rows": self.rows,
            "rows_exact": self.rows_exact,
            "bytes": self.bytes,
            "registered": self.registered,
            "hold_until": self.hold_until.isoformat() if self.hold_until else None,
        }


@dataclass(frozen=True)
class Inventory:
    tables: list[TableInfo]
    unreachable: dict[str, str]  # shard -> why


@dataclass(frozen=True)
class Filter:
    kind: str | None = None
    owner_ids: frozenset[int] | None = None
    group: str | None = None
    first: date | None = None
    last: date | None = None
    shard: str | None = None

    def keeps(self, table: DayTable, group: str | None, shard: str) -> bool:
        return (
            (self.kind is None or table.kind == self.kind)
            and (self.owner_ids is None or table.owner_id in self.owner_ids)
            and (self.group is None or group == self.group)
            and (self.first is None or table.day >= self.first)
            and (self.last is None or table.day <= self.last)
            and (self.shard is None or shard == self.shard)
        )


async def _owners(metadata: asyncpg.Pool) -> dict[tuple[str, int], tuple[str, str]]:
    rows = await metadata.fetch("SELECT kind, id, key, group_name FROM owners")
    return {(r["kind"], r["id"]): (r["key"], r["group_name"]) for r in rows}


async def _registry(metadata: asyncpg.Pool) -> dict[tuple[str, int, date, str], date | None]:
    rows = await metadata.fetch("SELECT kind, owner_id, day, shard, hold_until FROM day_tables")
    return {(r["kind"], r["owner_id"], r["day"], r["shard"]): r["hold_until"] for r in rows}


async def _shard_tables(
    pools: ShardPools, shard: str, exact: bool, wanted: Filter
) -> list[tuple[DayTable, int, int, bool]]:
    # The group is known only after the owner join: checked by the caller.
    here = replace(wanted, group=None)
    async with pools.reader(shard, primary=True).acquire() as connection:
        found = []
        for record in await connection.fetch(RELATIONS_SQL, DAY_TABLE_REGEX):
            table = parse_day_table(record["relname"])
            if table is None or not here.keeps(table, None, shard):
                continue
            rows = record["rows"]
            if exact:
                try:
                    rows = await connection.fetchval(f"SELECT count(*) FROM {table.quoted}")
                except asyncpg.UndefinedTableError:
                    continue  # dropped while we listed
            found.append((table, rows, record["bytes"], exact))
        return found


async def take(
    metadata: asyncpg.Pool,
    pools: ShardPools,
    snapshot: CatalogSnapshot,
    wanted: Filter | None = None,
    exact: bool = False,
) -> Inventory:
    """Every day table on every shard not marked down, filtered, ordered by (owner, day,
    shard). Shards that cannot be read are named in ``unreachable``."""
    wanted = wanted or Filter()
    owners, registry = await asyncio.gather(_owners(metadata), _registry(metadata))
    shards = sorted(
        name
        for name, shard in snapshot.shards.items()
        if shard.state != "down" and (wanted.shard is None or name == wanted.shard)
    )
    results = await asyncio.gather(
        *(_shard_tables(pools, shard, exact, wanted) for shard in shards),
        return_exceptions=True,
    )
    tables: list[TableInfo] = []
    unreachable: dict[str, str] = {}
    for shard, result in zip(shards, results, strict=True):
        if isinstance(result, BaseException):
            if not isinstance(result, _ERRORS):
                raise result
            unreachable[shard] = describe(result)
            continue
        for table, rows, size, rows_exact in result:
            key, group = owners.get((table.kind, table.owner_id), (None, None))
            if not wanted.keeps(table, group, shard):
                continue
            entry = (table.kind, table.owner_id, table.day, shard)
            tables.append(
                TableInfo(
                    table,
                    shard,
                    rows,
                    rows_exact,
                    size,
                    key,
                    group,
                    entry in registry,
                    registry.get(entry),
                )
            )
    tables.sort(key=lambda t: (t.table.kind, t.table.owner_id, t.table.day, t.shard))
    return Inventory(tables, unreachable)
