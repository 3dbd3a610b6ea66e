"""Connections going back to their pool: writer, reader and catalog connections skip asyncpg's
reset query (a round trip per part written, shard searched or catalog look-up) and only roll
back a transaction left open; with SHARDLOG_POOLS__*_RESET_QUERY (SHARDLOG_METADATA__RESET_QUERY)
on, the reset query runs. Retention's session lock, the one session state a catalog connection
takes, ends with the run: tests/integration/test_retention_lock.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
import httpx
import pytest

from bench.shard_view import catalog_shards
from router.db import catalog_login, pools, roles
from router.settings import PoolSettings, Settings


@pytest.fixture
def shard_dsn(api: httpx.Client) -> str:
    return sorted(catalog_shards(api).items())[0][1]


async def one_connection_pool(
    dsn: str, settings: Settings, role: str, **options: bool
) -> asyncpg.Pool:
    lean = PoolSettings(**{**settings.pools.model_dump(), "min_size": 0, "max_size": 1, **options})
    return await pools.create_pool(dsn, lean, role=role)


MakePool = Callable[..., Awaitable[asyncpg.Pool]]


@pytest.fixture
async def pool_of(shard_dsn: str, settings: Settings) -> AsyncIterator[MakePool]:
    made: list[asyncpg.Pool] = []

    async def make(role: str, **options: bool) -> asyncpg.Pool:
        pool = await one_connection_pool(shard_dsn, settings, role, **options)
        made.append(pool)
        return pool

    yield make
    for pool in made:
        await pool.close()


async def session_name_after_release(pool: asyncpg.Pool) -> str:
    """Set a session-level value, give the connection back, take it again: the value is still
    there unless the reset query ran."""
    async with pool.acquire() as connection:
        backend = await connection.fetchval("SELECT pg_backend_pid()")
        await connection.execute("SET application_name = 'left-behind'")
    async with pool.acquire() as connection:
        assert await connection.fetchval("SELECT pg_backend_pid()") == backend
        return str(await connection.fetchval("SHOW application_name"))


@pytest.mark.parametrize("role", [roles.READER, roles.WRITER])
async def test_no_reset_query_on_release(pool_of: MakePool, role: str) -> None:
    pool = await pool_of(role)
    assert await session_name_after_release(pool) == "left-behind"


@pytest.mark.parametrize(
    ("role", "option"),
    [(roles.READER, "reader_reset_query"), (roles.WRITER, "writer_reset_query")],
)
async def test_reset_query_when_asked(pool_of: MakePool, role: str, option: str) -> None:
    pool = await pool_of(role, **{option: True})
    assert await session_name_after_release(pool) != "left-behind"


@pytest.mark.parametrize("role", [roles.READER, roles.WRITER])
async def test_an_open_transaction_is_rolled_back(pool_of: MakePool, role: str) -> None:
    pool = await pool_of(role)
    async with pool.acquire() as connection:
        await connection.execute("BEGIN READ ONLY")
        await connection.execute("SET LOCAL cursor_tuple_fraction = 1.0")
        await connection.execute("DECLARE left_open CURSOR FOR SELECT 1")
    async with pool.acquire() as connection:
        assert not connection.is_in_transaction()
        assert await connection.fetchval("SHOW cursor_tuple_fraction") == "0.1"
        assert (
            await connection.fetchval("SELECT count(*) FROM pg_cursors WHERE name = 'left_open'")
            == 0
        )


@pytest.fixture
async def metadata_pool_of(api: httpx.Client, settings: Settings) -> AsyncIterator[MakePool]:
    made: list[asyncpg.Pool] = []

    async def make(**options: bool) -> asyncpg.Pool:
        one = settings.metadata.model_copy(update={"pool_size": 1, **options})
        pool = await pools.create_metadata_pool(catalog_login.catalog_dsn(settings), one)
        made.append(pool)
        return pool

    yield make
    for pool in made:
        await pool.close()


async def test_catalog_connections_skip_the_reset_query(metadata_pool_of: MakePool) -> None:
    assert await session_name_after_release(await metadata_pool_of()) == "left-behind"


async def test_catalog_reset_query_when_asked(metadata_pool_of: MakePool) -> None:
    pool = await metadata_pool_of(reset_query=True)
    assert await session_name_after_release(pool) != "left-behind"


async def test_a_catalog_transaction_left_open_is_rolled_back(metadata_pool_of: MakePool) -> None:
    pool = await metadata_pool_of()
    async with pool.acquire() as connection:
        await connection.execute("BEGIN READ ONLY")
        await connection.execute("SET LOCAL cursor_tuple_fraction = 1.0")
    async with pool.acquire() as connection:
        assert not connection.is_in_transaction()
        assert await connection.fetchval("SHOW cursor_tuple_fraction") == "0.1"
