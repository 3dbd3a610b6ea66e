"""Bringing a database into the catalog as a shard: probe it, judge it (catalog/shard_guard),
migrate it, stamp its identity, then record it with its database. Nothing is written to the
database before it passed every check."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import asyncpg

from router.catalog import shard_guard, store
from router.catalog.shard_guard import KnownShard
from router.catalog.snapshot import Shard
from router.db import pools, probe, roles
from router.db.failures import DRIVER_ERRORS, describe, is_transient
from router.db.migrate import MigrationError, created_relations, load_migrations, migrate
from router.errors import Conflict, Invalid, Unavailable
from router.settings import PoolSettings

log = logging.getLogger(__name__)


async def register_shard(
    metadata: store.Executor,
    schema_dir: Path,
    pool_settings: PoolSettings,
    name: str,
    group: str,
    dsn: str,
    *,
    force: bool = False,
) -> Shard:
    await store.check_new_shard(metadata, name, group, dsn)
    shard_relations = created_relations(load_migrations(schema_dir, "shard"))
    try:
        connection = await pools.connect(dsn, pool_settings)
    except DRIVER_ERRORS as exc:
        raise Invalid(f"cannot connect to the shard: {exc}", "dsn") from exc
    try:
        candidate = await _probe(connection, shard_relations)
        shard_guard.check_candidate(
            candidate,
            name,
            await probe.database_identity(metadata),
            await known_shards(metadata, pool_settings),
            force=force,
        )
        await _prepare_roles(connection, dsn, pool_settings)
        await _migrate(connection, schema_dir)
        await stamp_identity(connection, name, group)
    finally:
        await connection.close()
    return await store.insert_shard(metadata, name, group, dsn, candidate.identity)


async def _probe(
    connection: asyncpg.Connection, shard_relations: frozenset[str]
) -> probe.Candidate:
    try:
        return await probe.probe_candidate(connection, shard_relations)
    except DRIVER_ERRORS as exc:
        raise Invalid(f"cannot inspect the shard's database: {describe(exc)}", "dsn") from exc


async def known_shards(metadata: store.Executor, pool_settings: PoolSettings) -> list[KnownShard]:
    """Every registered shard's database: as recorded, or probed now for shards registered
    before databases were recorded (and then recorded)."""
    recorded = await store.shard_databases(metadata)
    legacy = [shard for shard in recorded if shard.database is None]
    probed = await asyncio.gather(*(_probe_known(shard, pool_settings) for shard in legacy))
    for shard in probed:
        if shard.identity is not None:
            await _record(metadata, shard.name, shard.identity)
    by_name = {shard.name: shard for shard in probed}
    return [by_name.get(s.name) or KnownShard(s.name, s.database) for s in recorded]


async def _probe_known(shard: store.ShardDatabase, pool_settings: PoolSettings) -> KnownShard:
    try:
        return KnownShard(shard.name, await probe.probe_identity(shard.dsn, pool_settings))
    except DRIVER_ERRORS as exc:
        return KnownShard(shard.name, None, describe(exc))


async def _record(metadata: store.Executor, name: str, identity: probe.DatabaseIdentity) -> None:
    holder = await store.record_shard_database(metadata, name, identity)
    if holder is not None:
        log.warning(
            "shards %s and %s reach the same database (%s); two shards must never share one",
            holder,
            name,
            identity.describe(),
        )


async def _prepare_roles(
    connection: asyncpg.Connection, dsn: str, pool_settings: PoolSettings
) -> None:
    """The shard's server gets shardlog's roles (cluster-wide, created by the DSN's user, the
    bootstrap superuser) before the migrations grant them their privileges."""
    try:
        await roles.prepare(connection, dsn, pool_settings.passfile)
    except roles.RoleError as exc:
        raise Invalid(f"cannot set up the shard's roles: {exc}", "dsn") from exc
    except DRIVER_ERRORS as exc:
        if is_transient(exc):
            raise Unavailable(
                f"the shard's database failed while its roles were set up: {describe(exc)}",
                "dsn",
            ) from exc
        raise Conflict(f"cannot set up the shard's roles: {describe(exc)}", "dsn") from exc


async def _migrate(connection: asyncpg.Connection, schema_dir: Path) -> None:
    try:
        await migrate(connection, schema_dir, "shard")
    except MigrationError as exc:
        raise Conflict(f"cannot migrate the shard's database: {exc}", "dsn") from exc
    except DRIVER_ERRORS as exc:
        if is_transient(exc):
            raise Unavailable(
                f"the shard's database failed during its migration: {describe(exc)}", "dsn"
            ) from exc
        raise Conflict(f"cannot migrate the shard's database: {describe(exc)}", "dsn") from exc


async def stamp_identity(connection: asyncpg.Connection, name: str, group: str) -> None:
    """Record the shard's name in its own database; a database that is already another shard
    is refused (a second line of defence: the probe saw no stamp, but a concurrent
    registration may have stamped it since)."""
    async with connection.transaction():
        current = await connection.fetchrow("SELECT shard_name FROM shard_identity FOR UPDATE")
        if current is not None and current["shard_name"] != name:
            raise Conflict(
                f"this database is already registered as shard {current['shard_name']!r}",
                "dsn",
            )
        await connection.execute(
            "INSERT INTO shard_identity (shard_name, group_name) VALUES ($1, $2) "
            "ON CONFLICT (singleton) DO UPDATE SET group_name = EXCLUDED.group_name",
            name,
            group,
        )
