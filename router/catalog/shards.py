"""Bringing a database into the catalog as a shard: probe it, migrate it, stamp its identity,
then record it. Refuses a DSN that reaches a database already registered as another shard."""

from __future__ import annotations

from pathlib import Path

import asyncpg

from router.catalog import store
from router.catalog.snapshot import Shard
from router.db import pools
from router.db.failures import DRIVER_ERRORS
from router.db.migrate import migrate
from router.errors import Conflict, Invalid
from router.settings import PoolSettings


async def register_shard(
    metadata: store.Executor,
    schema_dir: Path,
    pool_settings: PoolSettings,
    name: str,
    group: str,
    dsn: str,
) -> Shard:
    await store.check_new_shard(metadata, name, group, dsn)
    try:
        connection = await pools.connect(dsn, pool_settings)
    except DRIVER_ERRORS as exc:
        raise Invalid(f"cannot connect to the shard: {exc}", "dsn") from exc
    try:
        await migrate(connection, schema_dir, "shard")
        await stamp_identity(connection, name, group)
    finally:
        await connection.close()
    return await store.insert_shard(metadata, name, group, dsn)


async def stamp_identity(connection: asyncpg.Connection, name: str, group: str) -> None:
    """Record the shard's name in its own database; a database that is already another shard
    is refused."""
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
