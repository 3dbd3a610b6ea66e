"""The only code that writes the metadata catalog. Every change goes through here, whether it
comes from the admin API or the CLI; triggers bump the catalog version and NOTIFY routers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import date
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from router.catalog import rules
from router.catalog.snapshot import (
    CatalogSnapshot,
    OwnerMapping,
    RetentionPolicy,
    Shard,
    ShardGroup,
)
from router.db.probe import DatabaseIdentity
from router.errors import Conflict, Invalid, NotFound, Unavailable
from router.routing.groups import choose_group

Executor = asyncpg.Connection | asyncpg.Pool | PoolConnectionProxy


async def load_snapshot(db: Executor) -> CatalogSnapshot:
    async with (
        connection_of(db) as connection,
        connection.transaction(isolation="repeatable_read", readonly=True),
    ):
        version = await connection.fetchval("SELECT version FROM catalog_version")
        groups = await connection.fetch("SELECT name, placement, synchronous FROM shard_groups")
        shards = await connection.fetch("SELECT name, group_name, dsn, state FROM shards")
        policies = await connection.fetch(
            "SELECT id, kind, group_name, owner_key, keep_days, archive FROM retention_policies "
            "ORDER BY id"
        )
        sharing_from = await connection.fetchval("SELECT sharing_from FROM sharing")
    return CatalogSnapshot(
        version=int(version),
        groups={r["name"]: ShardGroup(r["name"], r["placement"], r["synchronous"]) for r in groups},
        shards={r["name"]: Shard(r["name"], r["group_name"], r["dsn"], r["state"]) for r in shards},
        retention=tuple(
            RetentionPolicy(
                r["id"], r["kind"], r["group_name"], r["owner_key"], r["keep_days"], r["archive"]
            )
            for r in policies
        ),
        sharing_from=sharing_from or date.max,
    )


async def catalog_version(db: Executor) -> int:
    return int(await db.fetchval("SELECT version FROM catalog_version"))


async def add_group(
    db: Executor, name: str, placement: str, synchronous: bool | None = None
) -> ShardGroup:
    rules.check_name(name, "name")
    rules.check_placement(placement)
    inserted = await db.fetchrow(
        "INSERT INTO shard_groups (name, placement, synchronous) VALUES ($1, $2, $3) "
        "ON CONFLICT (name) DO NOTHING RETURNING name, placement, synchronous",
        name,
        placement,
        synchronous,
    )
    if inserted is None:
        raise Conflict(f"shard group {name!r} already exists", "name")
    return ShardGroup(inserted["name"], inserted["placement"], inserted["synchronous"])


async def set_group_replication(db: Executor, name: str, synchronous: bool | None) -> ShardGroup:
    """Whether writes to the group wait for a standby (None: the kind's default)."""
    updated = await db.fetchrow(
        "UPDATE shard_groups SET synchronous = $2 WHERE name = $1 "
        "RETURNING name, placement, synchronous",
        name,
        synchronous,
    )
    if updated is None:
        raise NotFound(f"no shard group {name!r}", "name")
    return ShardGroup(updated["name"], updated["placement"], updated["synchronous"])


async def remove_group(db: Executor, name: str) -> int:
    """Remove an empty group: no shards, no owners mapped to it. Its retention policies, which
    then govern nothing, go with it; returns how many."""
    rules.check_name(name, "name")
    async with connection_of(db) as connection, connection.transaction():
        await lock_named(connection, "shard_groups", name, f"no shard group {name!r}")
        holds = await connection.fetchrow(
            "SELECT (SELECT count(*) FROM shards WHERE group_name = $1) AS shards, "
            "(SELECT count(*) FROM owners WHERE group_name = $1) AS owners",
            name,
        )
        assert holds is not None  # a SELECT without FROM: one row
        if holds["shards"] or holds["owners"]:
            raise Conflict(
                f"shard group {name!r} is not empty: {holds['shards']} shards, "
                f"{holds['owners']} owners mapped to it (drain and remove its shards, move its "
                "owners)",
                "name",
            )
        policies = await connection.fetchval(
            "WITH gone AS (DELETE FROM retention_policies WHERE group_name = $1 RETURNING 1) "
            "SELECT count(*) FROM gone",
            name,
        )
        try:
            await connection.execute("DELETE FROM shard_groups WHERE name = $1", name)
        except asyncpg.ForeignKeyViolationError:
            raise Conflict(f"shard group {name!r} is not empty", "name") from None
    return int(policies)


async def ensure_group(db: Executor, name: str, placement: str) -> None:
    """Create the group unless it exists (bootstrap of a local cluster; never changes one)."""
    rules.check_name(name, "name")
    rules.check_placement(placement)
    await db.execute(
        "INSERT INTO shard_groups (name, placement) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        name,
        placement,
    )


async def check_new_shard(db: Executor, name: str, group: str, dsn: str) -> None:
    """Everything about a new shard that the catalog alone can refuse."""
    rules.check_name(name, "name")
    rules.check_name(group, "group")
    rules.check_dsn(dsn)
    if await db.fetchval("SELECT 1 FROM shard_groups WHERE name = $1", group) is None:
        raise NotFound(f"shard group {group!r} does not exist", "group")
    if await db.fetchval("SELECT 1 FROM shards WHERE name = $1", name) is not None:
        raise Conflict(f"shard {name!r} already exists", "name")
    holder = await db.fetchval("SELECT name FROM shards WHERE dsn = $1", dsn)
    if holder is not None:
        raise Conflict(f"shard {holder!r} already uses this connection string", "dsn")


async def insert_shard(
    db: Executor, name: str, group: str, dsn: str, database: DatabaseIdentity
) -> Shard:
    try:
        await db.execute(
            "INSERT INTO shards (name, group_name, dsn, system_identifier, database_oid, "
            "database_name) VALUES ($1, $2, $3, $4, $5, $6)",
            name,
            group,
            dsn,
            database.system_identifier,
            database.database_oid,
            database.database,
        )
    except asyncpg.UniqueViolationError as exc:
        if exc.constraint_name == "shards_database_key":
            raise Conflict(
                "another shard was registered with this database meanwhile "
                f"({database.describe()})",
                "dsn",
            ) from exc
        field = "dsn" if exc.constraint_name == "shards_dsn_key" else "name"
        raise Conflict(f"a shard with this {field} already exists", field) from exc
    except asyncpg.ForeignKeyViolationError as exc:
        raise NotFound(f"shard group {group!r} does not exist", "group") from exc
    return Shard(name, group, dsn, "active")


@dataclass(frozen=True)
class ShardDatabase:
    """A registered shard and the database recorded for it (None: registered before shardlog
    recorded databases, and not reached since)."""

    name: str
    dsn: str
    database: DatabaseIdentity | None


async def shard_databases(db: Executor) -> list[ShardDatabase]:
    rows = await db.fetch(
        "SELECT name, dsn, system_identifier, database_oid, database_name FROM shards ORDER BY name"
    )
    return [
        ShardDatabase(
            row["name"],
            row["dsn"],
            None
            if row["system_identifier"] is None
            else DatabaseIdentity(
                row["system_identifier"], row["database_oid"], row["database_name"]
            ),
        )
        for row in rows
    ]


async def record_shard_database(db: Executor, name: str, database: DatabaseIdentity) -> str | None:
    """Record the database of a shard that has none recorded. Returns the name of another
    shard already recorded with the same database (nothing is recorded then), else None."""
    try:
        await db.execute(
            "UPDATE shards SET system_identifier = $2, database_oid = $3, database_name = $4 "
            "WHERE name = $1 AND system_identifier IS NULL",
            name,
            database.system_identifier,
            database.database_oid,
            database.database,
        )
    except asyncpg.UniqueViolationError:
        holder: str = await db.fetchval(
            "SELECT name FROM shards WHERE system_identifier = $1 AND database_oid = $2",
            database.system_identifier,
            database.database_oid,
        )
        return holder
    return None


async def set_shard_state(db: Executor, name: str, state: str) -> Shard:
    rules.check_state(state)
    row = await db.fetchrow(
        "UPDATE shards SET state = $2, updated_at = now() WHERE name = $1 "
        "RETURNING name, group_name, dsn, state",
        name,
        state,
    )
    if row is None:
        raise NotFound(f"shard {name!r} does not exist", "name")
    return Shard(row["name"], row["group_name"], row["dsn"], row["state"])


async def get_owner(db: Executor, kind: str, key: str) -> OwnerMapping | None:
    row = await db.fetchrow(
        f"SELECT {OWNER_COLUMNS} FROM owners WHERE kind = $1 AND key = $2", kind, key
    )
    return _owner(row) if row else None


async def get_owners(db: Executor, kind: str, keys: list[str]) -> dict[str, OwnerMapping]:
    """The mappings of those of ``keys`` that exist, by key."""
    return await _owners(db, kind, keys)


async def owners_by_id(db: Executor, kind: str, ids: list[int]) -> dict[int, OwnerMapping]:
    """The mappings of those of ``ids`` that exist, by catalog id."""
    rows = await db.fetch(
        f"SELECT {OWNER_COLUMNS} FROM owners WHERE kind = $1 AND id = ANY($2::bigint[])",
        kind,
        ids,
    )
    return {row["id"]: _owner(row) for row in rows}


async def owners_with_tables(
    db: Executor,
    kind: str,
    tenant: str | None,
    prefixes: Sequence[str],
    prefix: str | None,
    first: date,
    last: date,
    limit: int,
    *,
    own_only: bool = False,
) -> list[OwnerMapping]:
    """Up to ``limit`` owners with a day table or shared rows (owner_shards; not with
    ``own_only``) between ``first`` and ``last`` (inclusive), of ``tenant`` (None: any) whose
    key starts with one of ``prefixes`` (none: any) and with ``prefix``. starts_with, not
    LIKE: a prefix is data, its '%' and '_' are characters."""
    rows = await db.fetch(
        f"SELECT {OWNER_COLUMNS} FROM owners AS o WHERE kind = $1 "
        "AND ($2::text IS NULL OR tenant = $2) "
        "AND (cardinality($3::text[]) = 0 "
        "     OR EXISTS (SELECT 1 FROM unnest($3::text[]) AS p (prefix) "
        "                WHERE starts_with(o.key, p.prefix))) "
        "AND ($4::text IS NULL OR starts_with(key, $4)) "
        "AND (EXISTS (SELECT 1 FROM day_tables AS d WHERE d.kind = o.kind "
        "             AND d.owner_id = o.id AND d.day BETWEEN $5 AND $6) "
        "     OR (NOT $8 AND EXISTS (SELECT 1 FROM owner_shards AS s JOIN shared_tables AS t "
        "                ON t.kind = s.kind AND t.shard = s.shard AND t.day >= s.since "
        "                WHERE s.kind = o.kind AND s.owner_id = o.id "
        "                AND t.day BETWEEN $5 AND $6))) "
        "ORDER BY id LIMIT $7",
        kind,
        tenant,
        list(prefixes),
        prefix,
        first,
        last,
        limit,
        own_only,
    )
    return [_owner(row) for row in rows]


async def set_own_tables(db: Executor, kind: str, key: str) -> OwnerMapping | None:
    """The owner's new days go to day tables of its own (router/ingest/sharing.py); None when
    the key is not mapped."""
    row = await db.fetchrow(
        "UPDATE owners SET own_tables = true WHERE kind = $1 AND key = $2 "
        f"RETURNING {OWNER_COLUMNS}",
        kind,
        key,
    )
    return _owner(row) if row else None


async def get_owner_by_id(db: Executor, kind: str, owner_id: int) -> OwnerMapping | None:
    row = await db.fetchrow(
        f"SELECT {OWNER_COLUMNS} FROM owners WHERE kind = $1 AND id = $2", kind, owner_id
    )
    return _owner(row) if row else None


async def map_owner(
    db: Executor,
    kind: str,
    key: str,
    group: str,
    tenant: str | None = None,
    *,
    force: bool = False,
) -> OwnerMapping:
    """Map an owner to a group (and a tenant) by hand. A key not mapped yet needs its tenant.
    Moving an owner that is already mapped to another group or tenant needs ``force``: rows
    written before stay in the old group, and the old tenant's tokens lose the key."""
    rules.check_kind(kind)
    rules.check_owner_key(key)
    rules.check_name(group, "group")
    if tenant is not None:
        rules.check_name(tenant, "tenant")
    async with connection_of(db) as connection, connection.transaction():
        if await connection.fetchval("SELECT 1 FROM shard_groups WHERE name = $1", group) is None:
            raise NotFound(f"shard group {group!r} does not exist", "group")
        if tenant is not None and (
            await connection.fetchval("SELECT 1 FROM tenants WHERE name = $1", tenant) is None
        ):
            raise NotFound(f"tenant {tenant!r} does not exist", "tenant")
        current = await connection.fetchrow(
            "SELECT group_name, tenant FROM owners WHERE kind = $1 AND key = $2 FOR UPDATE",
            kind,
            key,
        )
        if current is None and tenant is None:
            raise Invalid(f"{kind} owner is not mapped yet: name its tenant", "tenant")
        if current is not None and current["group_name"] != group and not force:
            raise Conflict(
                f"{kind} owner is already mapped to group {current['group_name']!r}; rows "
                "written so far stay there. Pass force to remap anyway",
                "group",
            )
        if current is not None and tenant not in (None, current["tenant"]) and not force:
            raise Conflict(
                f"{kind} owner belongs to tenant {current['tenant']!r}; pass force to move it "
                "to another tenant (its tokens lose it)",
                "tenant",
            )
        if tenant is None:
            assert current is not None  # refused above otherwise
            tenant = current["tenant"]
        row = await connection.fetchrow(
            "INSERT INTO owners (kind, key, group_name, assigned_by, tenant) "
            "VALUES ($1, $2, $3, 'admin', $4) "
            "ON CONFLICT (kind, key) DO UPDATE SET group_name = EXCLUDED.group_name, "
            "assigned_by = 'admin', tenant = EXCLUDED.tenant, updated_at = now() "
            f"RETURNING {OWNER_COLUMNS}",
            kind,
            key,
            group,
            tenant,
        )
        assert row is not None  # INSERT ... ON CONFLICT DO UPDATE returns its row
        if current is not None and current["tenant"] != tenant:
            # The shards' mirrors still say the old tenant: router/catalog/mirror.py.
            await connection.execute(
                "INSERT INTO mirror_pending (kind, owner_id) VALUES ($1, $2) "
                "ON CONFLICT (kind, owner_id) DO UPDATE SET recorded_at = now()",
                kind,
                row["id"],
            )
    return _owner(row)


async def resolve_owners(
    db: Executor,
    snapshot: CatalogSnapshot,
    kind: str,
    keys: Iterable[str],
    tenant: str,
    *,
    exclusive: bool = True,
    spread: int | None = None,
) -> dict[str, OwnerMapping]:
    """Every owner's group; unmapped owners are given one by the stable rule and recorded as
    ``tenant``'s, audit owners with ``spread`` (None: the whole group). Concurrent first
    writes from several routers agree: the first recorded mapping (group and tenant) wins.
    With ``exclusive``, when some key already belongs to another tenant nothing is claimed:
    the mapped keys are returned, the caller refuses (also when another tenant's write claims
    one of them while this one claims the rest: the claim is rolled back)."""
    wanted = sorted(set(keys))
    found = await _owners(db, kind, wanted)
    if exclusive and any(m.tenant != tenant for m in found.values()):
        return found
    missing = [key for key in wanted if key not in found]
    if missing:
        rules.check_kind(kind)
        for key in missing:
            rules.check_owner_key(key, "owner")
        candidates = snapshot.writable_groups()
        if not candidates:
            raise Unavailable("no shard group has an active shard")
        groups = [choose_group(kind, key, candidates) for key in missing]
        try:
            async with connection_of(db) as connection, connection.transaction():
                await connection.execute(
                    "INSERT INTO owners (kind, key, group_name, assigned_by, tenant, spread) "
                    "SELECT $1, key, group_name, 'rule', $4, $5 FROM unnest($2::text[], "
                    "$3::text[]) AS new (key, group_name) ON CONFLICT (kind, key) DO NOTHING",
                    kind,
                    missing,
                    groups,
                    tenant,
                    spread if kind == "audit" else None,
                )
                claimed = await _owners(connection, kind, missing)
                if exclusive and any(m.tenant != tenant for m in claimed.values()):
                    # Another tenant's write took one of the keys meanwhile: the caller
                    # refuses, so none of this request's keys stays claimed.
                    raise _ClaimedByAnother(claimed)
        except _ClaimedByAnother as race:
            claimed = {k: m for k, m in race.claimed.items() if m.tenant != tenant}
        found.update(claimed)
    return found


class _ClaimedByAnother(Exception):
    """Rolls back a claim that found a key of another tenant among its own."""

    def __init__(self, claimed: dict[str, OwnerMapping]) -> None:
        super().__init__("a key was claimed by another tenant")
        self.claimed = claimed


async def _owners(db: Executor, kind: str, keys: list[str]) -> dict[str, OwnerMapping]:
    rows = await db.fetch(
        f"SELECT {OWNER_COLUMNS} FROM owners WHERE kind = $1 AND key = ANY($2::text[])",
        kind,
        keys,
    )
    return {row["key"]: _owner(row) for row in rows}


async def resolve_owner(
    db: Executor, snapshot: CatalogSnapshot, kind: str, key: str, tenant: str
) -> OwnerMapping:
    rules.check_owner_key(key, "owner")
    return (await resolve_owners(db, snapshot, kind, [key], tenant, exclusive=False))[key]


OWNER_COLUMNS = "kind, key, group_name, assigned_by, id, tenant, spread, own_tables"


def _owner(row: Any) -> OwnerMapping:
    return OwnerMapping(
        row["kind"],
        row["key"],
        row["group_name"],
        row["assigned_by"],
        row["id"],
        row["tenant"],
        row["spread"],
        row["own_tables"],
    )


async def widen_spread(
    db: Executor, kind: str, owner_id: int, spread: int | None
) -> OwnerMapping | None:
    """Widen an owner's spread to ``spread`` (None: the whole group); never narrows it, so
    routers widening at once agree on the widest. Returns the mapping as recorded now (None:
    no such owner)."""
    if spread is not None and spread < 1:
        raise Invalid("spread must be at least 1 (or none: the whole group)", "spread")
    await db.execute(
        "UPDATE owners SET spread = $3, updated_at = now() WHERE kind = $1 AND id = $2 "
        "AND spread IS NOT NULL AND ($3::integer IS NULL OR spread < $3)",
        kind,
        owner_id,
        spread,
    )
    return await get_owner_by_id(db, kind, owner_id)


async def set_spread(db: Executor, kind: str, key: str, spread: int | None) -> OwnerMapping:
    """Set an owner's spread by hand, narrower too (its rows written so far stay where they
    are: searches find them through day_tables)."""
    rules.check_kind(kind)
    if spread is not None and spread < 1:
        raise Invalid("spread must be at least 1 (or none: the whole group)", "spread")
    row = await db.fetchrow(
        "UPDATE owners SET spread = $3, updated_at = now() WHERE kind = $1 AND key = $2 "
        f"RETURNING {OWNER_COLUMNS}",
        kind,
        key,
        spread,
    )
    if row is None:
        raise NotFound(f"{kind} owner is not mapped", "key")
    return _owner(row)


@asynccontextmanager
async def connection_of(db: Executor) -> AsyncIterator[asyncpg.Connection | PoolConnectionProxy]:
    """Use a connection as is, or acquire one from a pool for the block."""
    if isinstance(db, asyncpg.Pool):
        async with db.acquire() as connection:
            yield connection
    else:
        yield db


async def lock_named(connection: Executor, table: str, name: str, missing: str) -> None:
    """Lock a catalog row by its name for the caller's transaction; NotFound(``missing``,
    "name") when there is none. ``table``: a catalog table's name, never a caller's text."""
    if not await connection.fetchval(f"SELECT true FROM {table} WHERE name = $1 FOR UPDATE", name):
        raise NotFound(missing, "name")
