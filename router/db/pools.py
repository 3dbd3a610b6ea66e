"""One asyncpg pool per shard, kept in step with the catalog. Every connection carries
application_name and statement_timeout; multi-host DSNs get target_session_attrs, and their
hosts are tried as router/db/multihost.py says (each with the whole connect timeout, a silent
one beside the next)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import asyncpg

from router.catalog.snapshot import CatalogSnapshot
from router.db.connection import Connection, prepare_shard_connection
from router.db.dsn import as_uri, for_asyncpg, parse_dsn
from router.db.inet import install_codec
from router.db.multihost import HostPicker
from router.errors import Unavailable
from router.settings import MetadataSettings, PoolSettings

log = logging.getLogger(__name__)

__all__ = ["Connection", "ShardPools", "connect", "create_pool"]


def connect_options(dsn: str, settings: PoolSettings, target: str | None = None) -> dict[str, Any]:
    """``target`` overrides the DSN's target_session_attrs (the search pool of a multi-host
    shard)."""
    uri, dsn_timeout = for_asyncpg(dsn)
    options: dict[str, Any] = {
        "dsn": uri,
        "timeout": dsn_timeout or settings.connect_timeout_s,
        "server_settings": {
            "application_name": settings.application_name,
            "statement_timeout": str(settings.statement_timeout_ms),
        },
    }
    parsed = parse_dsn(dsn)
    if parsed.multi_host and target is not None:
        options["target_session_attrs"] = target
    elif parsed.multi_host and "target_session_attrs" not in parsed.params:
        options["target_session_attrs"] = settings.multi_host_target
    return options


async def connect(dsn: str, settings: PoolSettings) -> asyncpg.Connection:
    return await HostPicker().connect(**connect_options(dsn, settings))


async def create_pool(dsn: str, settings: PoolSettings, target: str | None = None) -> asyncpg.Pool:
    # min_size 0 by default: a shard that is down at start-up must not stop the router.
    pool = await asyncpg.create_pool(
        min_size=settings.min_size,
        max_size=settings.max_size,
        init=prepare_shard_connection,
        connect=HostPicker().connect,
        **connect_options(dsn, settings, target),
    )
    assert pool is not None
    return pool


class ShardPools:
    """Pools by shard name; ``reconcile`` opens pools for new shards and closes those whose
    shard left the catalog or changed its DSN. With ``search_target = prefer-standby`` a
    multi-host shard also gets a read pool that prefers a standby (``reader``)."""

    def __init__(self, settings: PoolSettings) -> None:
        self._settings = settings
        self._pools: dict[str, tuple[str, asyncpg.Pool]] = {}
        self._readers: dict[str, asyncpg.Pool] = {}
        self._lock = asyncio.Lock()

    async def reconcile(self, snapshot: CatalogSnapshot) -> None:
        async with self._lock:
            stale = [
                name
                for name, (dsn, _) in self._pools.items()
                if name not in snapshot.shards or snapshot.shards[name].dsn != dsn
            ]
            for name in stale:
                _, pool = self._pools.pop(name)
                await _close(pool)
                if name in self._readers:
                    await _close(self._readers.pop(name))
            for shard in snapshot.shards.values():
                if shard.name not in self._pools:
                    self._pools[shard.name] = (
                        shard.dsn,
                        await create_pool(shard.dsn, self._settings),
                    )
                    if self._wants_reader(shard.dsn):
                        self._readers[shard.name] = await create_pool(
                            shard.dsn, self._settings, self._settings.search_target
                        )

    def _wants_reader(self, dsn: str) -> bool:
        return self._settings.search_target != "read-write" and parse_dsn(dsn).multi_host

    def get(self, name: str) -> asyncpg.Pool:
        """The shard's pool for writes (and for reads that must see every committed row)."""
        try:
            return self._pools[name][1]
        except KeyError:
            raise Unavailable(f"no connection pool for shard {name!r}", "shard") from None

    def reader(self, name: str) -> asyncpg.Pool:
        """The pool searches use: a standby's when configured and the shard has several
        hosts, else the same as ``get``."""
        return self._readers.get(name) or self.get(name)

    def names(self) -> list[str]:
        return sorted(self._pools)

    async def close(self) -> None:
        async with self._lock:
            pools = [pool for _, pool in self._pools.values()] + list(self._readers.values())
            self._pools.clear()
            self._readers.clear()
        await asyncio.gather(*(_close(pool) for pool in pools))


async def _close(pool: asyncpg.Pool) -> None:
    try:
        await asyncio.wait_for(pool.close(), timeout=5)
    except (TimeoutError, OSError, asyncpg.PostgresError):
        log.warning("pool did not close in time; terminating its connections")
        pool.terminate()


async def connect_metadata(dsn: str, settings: MetadataSettings) -> asyncpg.Connection:
    return await asyncpg.connect(
        as_uri(dsn),
        timeout=settings.connect_timeout_s,
        server_settings={"application_name": settings.application_name},
    )


async def create_metadata_pool(dsn: str, settings: MetadataSettings) -> asyncpg.Pool:
    pool = await asyncpg.create_pool(
        as_uri(dsn),
        min_size=1,
        max_size=settings.pool_size,
        timeout=settings.connect_timeout_s,
        server_settings={"application_name": settings.application_name},
        init=install_codec,  # rows read through the fdw coordinator carry inet values
    )
    assert pool is not None
    return pool
