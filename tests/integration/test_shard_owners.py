"""The shards' mirror of the catalog's owners (issue 38, step 2; schema/shard/0014_shard_owners.sql,
router/catalog/mirror.py): its rows are written by the writer role, read by the reader role and
by nobody else; a remap of an owner to another tenant (``force``) corrects its rows on every
shard it has shared rows on (``owner_shards``), and mapping an owner again as it is repairs a
mirror that missed an update. The oracle is the catalog's answer and the shards' rows."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from bench.shard_view import catalog_shards
from router.catalog import mirror, store
from router.catalog.mirror import remirror, write_mirror
from router.catalog.snapshot import OwnerMapping
from router.db import catalog_login, roles
from router.db.pools import ShardPools, connect
from router.settings import Settings
from tests.support import past_day, refused, run_cli

SINCE = past_day(4, 0).date()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
async def pools(api: httpx.Client, settings: Settings) -> AsyncIterator[ShardPools]:
    shard_pools = ShardPools(settings.pools)
    catalog = await catalog_login.open_pool(settings)
    try:
        await shard_pools.reconcile(await store.load_snapshot(catalog))
    finally:
        await catalog.close()
    yield shard_pools
    await shard_pools.close()


@pytest.fixture(scope="module")
def tenants(admin_api: httpx.Client) -> tuple[str, str]:
    names = (unique("mirror-a"), unique("mirror-b"))
    for name in names:
        assert admin_api.post("/v1/admin/tenants", json={"name": name}).status_code == 201
    return names


def group_of(admin_api: httpx.Client, shard: str) -> str:
    return str(
        next(s["group"] for s in admin_api.get("/v1/admin/shards").json() if s["name"] == shard)
    )


def map_owner(admin_api: httpx.Client, key: str, group: str, tenant: str, **extra: Any) -> int:
    answer = admin_api.put(
        "/v1/admin/owners",
        json={"kind": "audit", "key": key, "group": group, "tenant": tenant, **extra},
    )
    assert answer.status_code == 200, answer.text
    return int(answer.json()["id"])


async def mirrored(dsn: str, ident: int) -> tuple[str, str] | None:
    connection = await asyncpg.connect(dsn)
    try:
        row = await connection.fetchrow(
            "SELECT tenant, key FROM shard_owners WHERE kind = 'audit' AND owner_id = $1", ident
        )
    finally:
        await connection.close()
    return (row["tenant"], row["key"]) if row else None


async def test_only_the_writer_writes_the_mirror_and_the_reader_reads_it(
    api: httpx.Client, settings: Settings, pools: ShardPools
) -> None:
    shard, dsn = sorted(catalog_shards(api).items())[0]
    ident = 2**40 + uuid.uuid4().int % 2**30  # no catalog owner has it
    owner = OwnerMapping("audit", unique("k%_"), "g", "admin", ident, "t1")
    await write_mirror(pools.writer(shard), [owner, owner])
    assert await mirrored(dsn, ident) == ("t1", owner.key)
    moved = OwnerMapping("audit", owner.key + "x", "g", "admin", ident, "t2")
    await write_mirror(pools.writer(shard), [moved])
    assert await mirrored(dsn, ident) == ("t2", moved.key)
    async with pools.reader(shard).acquire() as reader:
        assert (
            await reader.fetchval(
                "SELECT tenant FROM shard_owners WHERE kind = 'audit' AND owner_id = $1", ident
            )
            == "t2"
        )
    writes = [
        "INSERT INTO shard_owners VALUES ('audit', 1, 't', 'k')",
        "UPDATE shard_owners SET tenant = 'x'",
        "DELETE FROM shard_owners",
    ]
    for role in (roles.READER, roles.RETENTION):
        connection = await connect(dsn, settings.pools, role=role)
        try:
            for sql in writes:
                await refused(connection, sql, *(("25006",) if role == roles.READER else ()))
        finally:
            await connection.close()
    for role in (roles.READER, roles.RETENTION):
        connection = await connect(dsn, settings.pools, role=role)
        try:
            await refused(connection, "SELECT shardlog_forget_owner('audit', 1)")
        finally:
            await connection.close()
    writer = await connect(dsn, settings.pools, role=roles.WRITER)
    try:
        await refused(writer, "DELETE FROM shard_owners")
        await refused(writer, "DROP TABLE shard_owners")
        # One forgotten owner's row at a time, through the erase's function.
        await mirror.forget(writer, "audit", ident)
    finally:
        await writer.close()
    assert await mirrored(dsn, ident) is None


async def test_a_remap_corrects_the_mirror_on_the_owners_shards(
    api: httpx.Client,
    admin_api: httpx.Client,
    catalog_pool: asyncpg.Pool,
    pools: ShardPools,
    tenants: tuple[str, str],
    settings: Settings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    metadata = catalog_pool
    shards = catalog_shards(api)
    first, second = sorted(shards)[:2]
    group = group_of(admin_api, first)
    key = unique("mirror%owner_")
    ident = map_owner(admin_api, key, group, tenants[0])
    owner = await store.get_owner_by_id(metadata, "audit", ident)
    assert owner is not None and owner.tenant == tenants[0]
    bystander_key = unique("mirror-bystander")
    bystander = map_owner(admin_api, bystander_key, group, tenants[0])
    try:
        for shard in (first, second):
            await metadata.execute(
                "INSERT INTO owner_shards (kind, owner_id, shard, since) "
                "VALUES ('audit', $1, $2, $3)",
                ident,
                shard,
                SINCE,
            )
            await write_mirror(pools.writer(shard), [owner])
        await metadata.execute(
            "INSERT INTO owner_shards (kind, owner_id, shard, since) VALUES ('audit', $1, $2, $3)",
            bystander,
            first,
            SINCE,
        )
        bystander_owner = await store.get_owner_by_id(metadata, "audit", bystander)
        assert bystander_owner is not None
        await write_mirror(pools.writer(first), [bystander_owner])

        refused_move = await asyncio.to_thread(
            admin_api.put,
            "/v1/admin/owners",
            json={"kind": "audit", "key": key, "group": group, "tenant": tenants[1]},
        )
        assert refused_move.status_code == 409, refused_move.text
        assert await mirrored(shards[first], ident) == (tenants[0], key)

        map_owner(admin_api, key, group, tenants[1], force=True)
        for shard in (first, second):
            assert await mirrored(shards[shard], ident) == (tenants[1], key), shard
        assert await mirrored(shards[first], bystander) == (tenants[0], bystander_key)
        for shard in sorted(shards)[2:]:
            assert await mirrored(shards[shard], ident) is None, shard

        # A shard that missed the update (here: its row rewritten behind the router's back)
        # is repaired by mapping the owner again as it is.
        stale = await asyncpg.connect(shards[second])
        try:
            await stale.execute(
                "UPDATE shard_owners SET tenant = $2 WHERE kind = 'audit' AND owner_id = $1",
                ident,
                tenants[0],
            )
        finally:
            await stale.close()
        map_owner(admin_api, key, group, tenants[1])
        assert await mirrored(shards[second], ident) == (tenants[1], key)

        # The CLI's map (as the catalog role, with shard pools of its own) repairs it too.
        stale = await asyncpg.connect(shards[first])
        try:
            await stale.execute(
                "UPDATE shard_owners SET key = 'stale' WHERE kind = 'audit' AND owner_id = $1",
                ident,
            )
        finally:
            await stale.close()
        result = await asyncio.to_thread(
            run_cli, settings, "owners", "map", "audit", key, group, "--tenant", tenants[1]
        )
        assert result.returncode == 0, result.stderr
        assert await mirrored(shards[first], ident) == (tenants[1], key)

        # Shards it cannot reach (here: no pool for any) are logged and named, not raised.
        unreachable = ShardPools(settings.pools)
        with caplog.at_level(logging.WARNING, logger="router.catalog.mirror"):
            assert await remirror(metadata, unreachable, owner) == sorted([first, second])
        await unreachable.close()
        assert all(shard in caplog.text for shard in (first, second))
        assert await mirrored(shards[first], ident) == (tenants[1], key)
    finally:
        await metadata.execute(
            "DELETE FROM owner_shards WHERE kind = 'audit' AND owner_id = ANY($1::bigint[])",
            [ident, bystander],
        )
        for dsn in shards.values():
            connection = await asyncpg.connect(dsn)
            try:
                await connection.execute(
                    "DELETE FROM shard_owners WHERE kind = 'audit' "
                    "AND owner_id = ANY($1::bigint[])",
                    [ident, bystander],
                )
            finally:
                await connection.close()
