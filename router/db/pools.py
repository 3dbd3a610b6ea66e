"""asyncpg pools per shard and role, kept in step with the catalog. Every connection carries
application_name and statement_timeout; multi-host DSNs get target_session_attrs, and their hosts
are tried as router/db/multihost.py says (each with the whole connect timeout, a silent one
beside the next); passwords come from the password file (SHARDLOG_POOLS__PASSFILE), and a DSN
without an sslmode gets the pools' TLS settings (SHARDLOG_POOLS__TLS_MODE, TLS_CA_FILE)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from router.catalog.snapshot import CatalogSnapshot
from router.db import passfile, roles
from router.db.connection import Connection, prepare_shard_connection
from router.db.dsn import as_uri, for_asyncpg, parse_dsn
from router.db.inet import install_codec
from router.db.multihost import HostPicker
from router.errors import Unavailable
from router.settings import MetadataSettings, PoolSettings, with_tls

log = logging.getLogger(__name__)

__all__ = ["Connection", "CoordinatorLogin", "ShardPools", "connect", "create_pool"]


def connect_options(
    dsn: str, settings: PoolSettings, target: str | None = None, role: str | None = None
) -> dict[str, Any]:
    """``target`` overrides the DSN's target_session_attrs (the search pool of a multi-host
    shard); ``role`` replaces the DSN's user (the pools' roles, router/db/roles.py). Passwords
    come from the password file, never from the catalog."""
    dsn = with_tls(dsn, settings)
    uri, dsn_timeout = for_asyncpg(dsn)
    server_settings = {
        "application_name": settings.application_name,
        "statement_timeout": str(settings.statement_timeout_ms),
    }
    if role == roles.READER:
        # Also the role's own default (ALTER ROLE); here too, whatever the server says.
        server_settings["default_transaction_read_only"] = "on"
    options: dict[str, Any] = {
        "dsn": uri,
        "timeout": dsn_timeout or settings.connect_timeout_s,
        "server_settings": server_settings,
    }
    if settings.passfile is not None:
        options["passfile"] = str(settings.passfile)
    if role is not None:
        options["user"] = role
    parsed = parse_dsn(dsn)
    if parsed.multi_host:
        in_dsn = parsed.params.get("target_session_attrs")
        chosen = target or in_dsn or settings.multi_host_target
        if role == roles.READER and chosen == "read-write":
            # "read-write" asks the session's transaction_read_only, which the reader's own
            # sessions turn on: no host would ever match. "primary" asks pg_is_in_recovery().
            chosen = "primary"
        if chosen != in_dsn or target is not None:
            options["target_session_attrs"] = chosen
    return options


async def connect(dsn: str, settings: PoolSettings, role: str | None = None) -> asyncpg.Connection:
    """One connection as ``role``, or as the DSN's user (the bootstrap superuser: migrations,
    registration, bring-up)."""
    return await HostPicker().connect(**connect_options(dsn, settings, role=role))


async def _rollback_only(connection: asyncpg.Connection) -> None:
    """What a writer, reader or catalog connection needs on its way back to the pool: none
    sets anything beyond its transactions (SET LOCAL, set_config(..., true); cursors live in
    transactions) or listens to anything (the tail and the catalog listen on connections of
    their own); the one session lock (a retention run's) is released, or its connection
    terminated. asyncpg's reset query would be a round trip per part written, shard searched
    or catalog look-up for nothing."""
    if connection.is_in_transaction():
        await connection.execute("ROLLBACK")


async def create_pool(
    dsn: str, settings: PoolSettings, target: str | None = None, role: str | None = None
) -> asyncpg.Pool:
    lean = (role == roles.WRITER and not settings.writer_reset_query) or (
        role == roles.READER and not settings.reader_reset_query
    )
    # min_size 0 by default: a shard that is down at start-up must not stop the router.
    pool = await asyncpg.create_pool(
        min_size=settings.min_size,
        max_size=settings.max_size,
        init=prepare_shard_connection,
        connect=HostPicker().connect,
        reset=_rollback_only if lean else None,
        **connect_options(dsn, settings, target, role),
    )
    assert pool is not None
    return pool


@dataclass(frozen=True)
class CoordinatorLogin:
    """How the postgres_fdw coordinator reaches a shard: ``dsn``, the shard's DSN with the
    pools' TLS settings (its foreign server's options), and ``user``, the user mapping's."""

    dsn: str
    user: dict[str, str] = field(default_factory=dict)


def coordinator_login(dsn: str, settings: PoolSettings) -> CoordinatorLogin:
    """The reader role and its password (a user mapping is readable by superusers and its own
    user only), over TLS as the router connects. Without the password the fdw path fails, not
    the caller."""
    user = {"user": roles.READER}
    if settings.passfile is not None:
        try:
            user["password"] = passfile.lookup(settings.passfile, dsn, roles.READER)
        except passfile.PassfileError as exc:
            log.warning("the coordinator gets no password for %s: %s", roles.READER, exc)
    return CoordinatorLogin(with_tls(dsn, settings), user)


@dataclass
class _ShardPools:
    dsn: str
    writer: asyncpg.Pool
    reader: asyncpg.Pool
    retention: asyncpg.Pool
    # search_target = prefer-standby on a multi-host shard: the reader role on a standby.
    standby_reader: asyncpg.Pool | None = None

    def all(self) -> list[asyncpg.Pool]:
        pools = [self.writer, self.reader, self.retention]
        return pools + ([self.standby_reader] if self.standby_reader is not None else [])


class ShardPools:
    """Pools by shard name, one per role (least privilege, router/db/roles.py): the writer's
    (ingest, day-table DDL, the ledger, restores, health), the reader's (searches, counts,
    exports, table listings) and retention's (drops). ``reconcile`` opens pools for new shards
    and closes those whose shard left the catalog or changed its DSN. With ``search_target =
    prefer-standby`` a multi-host shard's searches use a reader pool that prefers a standby."""

    def __init__(self, settings: PoolSettings) -> None:
        self._settings = settings
        self._pools: dict[str, _ShardPools] = {}
        self._lock = asyncio.Lock()

    async def reconcile(self, snapshot: CatalogSnapshot) -> None:
        async with self._lock:
            stale = [
                name
                for name, pools in self._pools.items()
                if name not in snapshot.shards or snapshot.shards[name].dsn != pools.dsn
            ]
            for name in stale:
                await asyncio.gather(*(_close(pool) for pool in self._pools.pop(name).all()))
            for shard in snapshot.shards.values():
                if shard.name not in self._pools:
                    self._pools[shard.name] = await self._open(shard.dsn)

    async def _open(self, dsn: str) -> _ShardPools:
        settings = self._settings
        pools = _ShardPools(
            dsn,
            await create_pool(dsn, settings, role=roles.WRITER),
            await create_pool(dsn, settings, role=roles.READER),
            await create_pool(dsn, settings, role=roles.RETENTION),
        )
        if settings.search_target != "read-write" and parse_dsn(dsn).multi_host:
            pools.standby_reader = await create_pool(
                dsn, settings, settings.search_target, roles.READER
            )
        return pools

    def _shard(self, name: str) -> _ShardPools:
        try:
            return self._pools[name]
        except KeyError:
            raise Unavailable(f"no connection pool for shard {name!r}", "shard") from None

    def writer(self, name: str) -> asyncpg.Pool:
        """The writer's pool: ingest, day-table DDL, the ingest ledger, restores."""
        return self._shard(name).writer

    def reader(self, name: str, primary: bool = False) -> asyncpg.Pool:
        """The reader's pool (SELECT only, read-only transactions): on a standby when
        configured and the shard has several hosts, unless ``primary`` (reads that must see
        every committed row)."""
        pools = self._shard(name)
        if pools.standby_reader is not None and not primary:
            return pools.standby_reader
        return pools.reader

    def retention(self, name: str) -> asyncpg.Pool:
        """Retention's pool: counts, archives and drops of day tables, nothing else."""
        return self._shard(name).retention

    def coordinator_login(self, dsn: str) -> CoordinatorLogin:
        return coordinator_login(dsn, self._settings)

    def names(self) -> list[str]:
        return sorted(self._pools)

    async def close(self) -> None:
        async with self._lock:
            pools = [pool for shard in self._pools.values() for pool in shard.all()]
            self._pools.clear()
        await asyncio.gather(*(_close(pool) for pool in pools))


async def _close(pool: asyncpg.Pool) -> None:
    try:
        await asyncio.wait_for(pool.close(), timeout=5)
    except (TimeoutError, OSError, asyncpg.PostgresError):
        log.warning("pool did not close in time; terminating its connections")
        pool.terminate()


def _metadata_server_settings(settings: MetadataSettings) -> dict[str, str]:
    # Custom plans always: the catalog's statements select by arrays of ids (`= ANY($2)`),
    # whose generic plan (PostgreSQL's choice after a prepared statement's fifth run) was 20x
    # slower: a search's owner-day lookup took 4 ms instead of 0.2 at 10,000 owners.
    return {"application_name": settings.application_name, "plan_cache_mode": "force_custom_plan"}


async def connect_metadata(dsn: str, settings: MetadataSettings) -> asyncpg.Connection:
    return await asyncpg.connect(
        as_uri(dsn),
        timeout=settings.connect_timeout_s,
        server_settings=_metadata_server_settings(settings),
    )


async def create_metadata_pool(dsn: str, settings: MetadataSettings) -> asyncpg.Pool:
    pool = await asyncpg.create_pool(
        as_uri(dsn),
        min_size=1,
        max_size=settings.pool_size,
        timeout=settings.connect_timeout_s,
        server_settings=_metadata_server_settings(settings),
        init=install_codec,  # rows read through the fdw coordinator carry inet values
        reset=None if settings.reset_query else _rollback_only,
    )
    assert pool is not None
    return pool
