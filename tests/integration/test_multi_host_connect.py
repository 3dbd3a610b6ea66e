"""Multi-host DSNs whose first host is gone, as a powered-off or hung host is: it accepts a TCP
connection (or its address swallows the SYN) and never answers. The router still reaches the
next host within the connect timeout, and once it did, goes there first."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import asyncpg
import pytest

from router.db import pools
from router.db.multihost import STAGGER_S, HostPicker
from router.settings import PoolSettings
from services.cluster import LocalCluster

SETTINGS = PoolSettings(connect_timeout_s=3)


class SilentHost:
    """A listener that accepts connections and never says a word."""

    def __init__(self) -> None:
        self.accepted = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def _accept(self, _reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self._writers.append(writer)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[SilentHost]:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            for writer in self._writers:
                writer.close()
            self._server.close()


@pytest.fixture
def shard(cluster: LocalCluster) -> Iterator[tuple[str, int]]:
    spec = cluster.instances["shard01"].spec
    yield spec.host, spec.port


def dsn(*hosts: tuple[str, int], target: str = "read-write") -> str:
    listed = ",".join(f"{host}:{port}" for host, port in hosts)
    return f"postgresql://shardlog@{listed}/shardlog?target_session_attrs={target}"


async def test_a_silent_first_host_costs_the_stagger_not_the_timeout(
    shard: tuple[str, int],
) -> None:
    async with SilentHost().running() as silent:
        started = time.monotonic()
        connection = await pools.connect(dsn(("127.0.0.1", silent.port), shard), SETTINGS)
        elapsed = time.monotonic() - started
        try:
            assert await connection.fetchval("SELECT NOT pg_is_in_recovery()")
        finally:
            await connection.close()
    assert silent.accepted == 1
    assert STAGGER_S <= elapsed < SETTINGS.connect_timeout_s, elapsed


async def test_the_host_that_answered_is_tried_first_next_time(shard: tuple[str, int]) -> None:
    picker = HostPicker()
    async with SilentHost().running() as silent:
        target = dsn(("127.0.0.1", silent.port), shard)
        options = pools.connect_options(target, SETTINGS)
        for _ in range(3):
            connection = await picker.connect(**options)
            await connection.close()
    assert silent.accepted == 1


async def test_a_pool_reaches_the_next_host(shard: tuple[str, int]) -> None:
    async with SilentHost().running() as silent:
        pool = await pools.create_pool(dsn(("127.0.0.1", silent.port), shard), SETTINGS)
        try:
            started = time.monotonic()
            rows = await asyncio.gather(*(pool.fetchval("SELECT 1") for _ in range(4)))
            assert rows == [1, 1, 1, 1]
            assert time.monotonic() - started < SETTINGS.connect_timeout_s
        finally:
            await pool.close()


async def test_a_refused_first_host_is_skipped_at_once(shard: tuple[str, int]) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        refused = closed.getsockname()[1]
    started = time.monotonic()
    connection = await pools.connect(dsn(("127.0.0.1", refused), shard), SETTINGS)
    await connection.close()
    assert time.monotonic() - started < STAGGER_S


async def test_every_host_failing_raises_the_last_error(shard: tuple[str, int]) -> None:
    """A primary is not a standby: no host matches, and the error says so."""
    with pytest.raises(asyncpg.InternalClientError, match="target attribute"):
        await pools.connect(dsn(shard, shard, target="standby"), SETTINGS)


async def test_a_single_host_dsn_keeps_the_whole_timeout() -> None:
    async with SilentHost().running() as silent:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await pools.connect(f"postgresql://shardlog@127.0.0.1:{silent.port}/x", SETTINGS)
    assert time.monotonic() - started >= SETTINGS.connect_timeout_s - 0.1
