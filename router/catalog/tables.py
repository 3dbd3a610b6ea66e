"""The registry of day tables (metadata table day_tables): written when a router creates a
table, read by search planning, reconciled with what the shards really hold by ``sync``.
Every entry is also attached to the postgres_fdw coordinator, in the same transaction."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import date

import asyncpg

from router.catalog.snapshot import Shard
from router.compaction import registry
from router.db.connection import Connection
from router.db.names import DayTable, Kind, day_table, parse_day_table, shared_table
from router.db.pools import CoordinatorLogin
from router.search import fdw

DAY_TABLE_REGEX = "^(audit_o|flow_s)[0-9]+_[0-9]{8}$"


async def record(
    metadata: asyncpg.Pool, table: DayTable, shard: Shard, login: CoordinatorLogin
) -> None:
    """``login``: how the coordinator reaches the shard (ShardPools.coordinator_login), used
    when this is the shard's first table there."""
    async with metadata.acquire() as connection, connection.transaction():
        await connection.execute(
            "INSERT INTO day_tables (kind, owner_id, day, shard) VALUES ($1, $2, $3, $4) "
            "ON CONFLICT DO NOTHING",
            table.kind,
            table.owner_id,
            table.day,
            shard.name,
        )
        await fdw.attach(connection, table, shard, login)


async def located(
    metadata: asyncpg.Pool, kind: Kind, owner_ids: Iterable[int], first: date, last: date
) -> list[tuple[str, DayTable]]:
    """(shard, owner-day) pairs of some owners between two days, inclusive: each owner-day
    with its own table's layout, whether it has an own table (day_tables) and whether its
    shard's shared table of the day may hold its rows (the shard is among the owner's
    owner_shards since that day and the shard-day's shared tables exist: shared_tables)."""
    rows = await metadata.fetch(
        "WITH own AS (SELECT owner_id, shard, day, layout FROM day_tables WHERE kind = $1 "
        "  AND owner_id = ANY($2::bigint[]) AND day BETWEEN $3 AND $4), "
        "shared AS (SELECT o.owner_id, o.shard, t.day, t.layout FROM owner_shards AS o "
        "  JOIN shared_tables AS t ON t.kind = o.kind AND t.shard = o.shard AND t.day >= o.since "
        "  WHERE o.kind = $1 AND o.owner_id = ANY($2::bigint[]) AND t.day BETWEEN $3 AND $4) "
        "SELECT owner_id, shard, day, own.layout, own.owner_id IS NOT NULL AS own, "
        "shared.owner_id IS NOT NULL AS shared, shared.layout AS shared_layout "
        "FROM own FULL JOIN shared USING (owner_id, shard, day) "
        "ORDER BY owner_id, day, shard",
        kind,
        list(owner_ids),
        first,
        last,
    )
    return [
        (
            row["shard"],
            replace(
                day_table(kind, row["owner_id"], row["day"]),
                compacted=row["layout"] == "compacted",
                own=row["own"],
                shared=row["shared"],
                shared_compacted=row["shared_layout"] == "compacted",
            ),
        )
        for row in rows
    ]


async def shard_days(
    metadata: asyncpg.Pool, kind: Kind, first: date, last: date
) -> list[tuple[str, date, bool]]:
    """(shard, day, compacted) of every shared table of ``kind`` the registry lists between two
    days, inclusive: where a search of a prefix or of no owner reads the small owners' rows."""
    rows = await metadata.fetch(
        "SELECT shard, day, layout FROM shared_tables WHERE kind = $1 "
        "AND day BETWEEN $2 AND $3 ORDER BY day, shard",
        kind,
        first,
        last,
    )
    return [(row["shard"], row["day"], row["layout"] == "compacted") for row in rows]


async def on_shard(connection: Connection) -> list[DayTable]:
    names = await connection.fetch(
        "SELECT relname FROM pg_class WHERE relkind = 'r' "
        "AND relnamespace = 'public'::regnamespace AND relname ~ $1",
        DAY_TABLE_REGEX,
    )
    return [t for t in (parse_day_table(r["relname"]) for r in names) if t is not None]


async def _attach_shared(
    meta: Connection, shard: Shard, connection: Connection, login: CoordinatorLogin
) -> None:
    """The coordinator's child of every shared table the registry lists on the shard and the
    shard holds (fdw.attach_shared makes those missing)."""
    entries = await meta.fetch(
        "SELECT kind, day FROM shared_tables WHERE shard = $1 ORDER BY day, kind", shard.name
    )
    present = {
        r["relname"]
        for r in await connection.fetch(
            "SELECT relname FROM pg_class WHERE relkind = 'r' "
            "AND relnamespace = 'public'::regnamespace AND relname = ANY($1::text[])",
            [shared_table(e["kind"], e["day"]) for e in entries],
        )
    }
    for entry in entries:
        if shared_table(entry["kind"], entry["day"]) in present:
            await fdw.attach_shared(meta, entry["kind"], entry["day"], shard, login)


async def sync(
    metadata: asyncpg.Pool, shard: Shard, connection: Connection, login: CoordinatorLogin
) -> int:
    """Record and attach the day tables a shard holds that the registry lacks; forget and
    detach those the shard lacks; attach the shard's registered shared tables whose
    coordinator child is missing. Returns how many day table entries changed."""
    present = await on_shard(connection)
    async with metadata.acquire() as meta, meta.transaction():
        known = {
            (r["kind"], r["owner_id"], r["day"])
            for r in await meta.fetch(
                "SELECT kind, owner_id, day FROM day_tables WHERE shard = $1", shard.name
            )
        }
        have = {(t.kind, t.owner_id, t.day) for t in present}
        missing, stale = have - known, known - have
        for kind, owner_id, day in missing:
            await meta.execute(
                "INSERT INTO day_tables (kind, owner_id, day, shard) VALUES ($1, $2, $3, $4) "
                "ON CONFLICT DO NOTHING",
                kind,
                owner_id,
                day,
                shard.name,
            )
        for kind, owner_id, day in have:
            await fdw.attach(meta, day_table(kind, owner_id, day), shard, login)
        # What the shard compacted, the registry reads as compacted (and the coordinator
        # through the owner-day's view), whatever the entry said.
        for row in await connection.fetch("SELECT kind, owner_id, day FROM compacted_days"):
            if (row["kind"], row["owner_id"], row["day"]) in have:
                await registry.switch_in(
                    meta, day_table(row["kind"], row["owner_id"], row["day"]), shard.name
                )
        await _attach_shared(meta, shard, connection, login)
        await fdw.refresh_login(meta, shard.name, login)
        for kind, owner_id, day in stale:
            await meta.execute(
                "DELETE FROM day_tables WHERE kind = $1 AND owner_id = $2 AND day = $3 "
                "AND shard = $4",
                kind,
                owner_id,
                day,
                shard.name,
            )
            await fdw.detach(meta, day_table(kind, owner_id, day), shard.name)
    return len(missing) + len(stale)
