"""Drops an expired shared day on one shard (docs/architecture.md, "Retention, erase,
archive"): its registry entries and coordinator children first (so no search plans or reads
it), then its shared tables and owner_days table in one transaction on the shard, through the
retention role's only way to drop them (shardlog_drop_shared_table), each lock awaited at most
lock_timeout, attempts repeated with a growing pause and then given up (the next run tries
again, and the entries and children are put back)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from router.catalog.snapshot import CatalogSnapshot, Shard
from router.db.connection import Connection
from router.db.failures import DRIVER_ERRORS, describe
from router.db.names import quote_ident
from router.db.pools import CoordinatorLogin, ShardPools
from router.retention import archive
from router.retention.dropper import Outcome, cancel_autovacuum_sooner
from router.retention.shared_days import ExpiredShared, relation_name
from router.search import fdw
from router.settings import RetentionSettings

_DROP = "SELECT shardlog_drop_shared_table($1::regclass)"
# The retention role's way to lock a table of shardlog_tables (schema/shard/0003_roles.sql):
# a shared table is one, and writers are kept out while its archive is written.
_LOCK = "SELECT shardlog_lock_day_table($1::regclass, 'SHARE')"


@dataclass(frozen=True)
class SharedDropped:
    outcome: Outcome
    tables: tuple[str, ...] = ()  # what this attempt dropped
    error: str | None = None
    archives: tuple[str, ...] = ()  # the files its archived tables were written to


async def _forget(metadata: asyncpg.Pool, item: ExpiredShared) -> None:
    """The shard-day's registry entries and coordinator children of its expiring kinds, in one
    metadata transaction."""
    entry = item.entry
    async with metadata.acquire() as connection, connection.transaction():
        await connection.execute(
            "DELETE FROM shared_tables WHERE kind = ANY($1::text[]) AND day = $2 AND shard = $3",
            list(item.kinds),
            entry.day,
            entry.shard,
        )
        for kind in item.kinds:
            await fdw.detach_shared(connection, kind, entry.day, entry.shard)


async def _record(
    metadata: asyncpg.Pool, item: ExpiredShared, shard: Shard, login: CoordinatorLogin
) -> None:
    """What ``_forget`` removed, put back."""
    entry = item.entry
    async with metadata.acquire() as connection, connection.transaction():
        await connection.execute(
            "INSERT INTO shared_tables (kind, day, shard) SELECT unnest($1::text[]), $2, $3 "
            "ON CONFLICT DO NOTHING",
            list(item.kinds),
            entry.day,
            entry.shard,
        )
        for kind in item.kinds:
            await fdw.attach_shared(connection, kind, entry.day, shard, login)


class SharedDropper:
    def __init__(
        self, metadata: asyncpg.Pool, pools: ShardPools, settings: RetentionSettings
    ) -> None:
        self._metadata = metadata
        self._pools = pools
        self._settings = settings

    async def drop(self, snapshot: CatalogSnapshot, item: ExpiredShared) -> SharedDropped:
        try:
            await _forget(self._metadata, item)
        except DRIVER_ERRORS as exc:
            return SharedDropped("failed", error=f"metadata: {describe(exc)}")
        result = await self._with_retries(item)
        shard = snapshot.shards.get(item.entry.shard)
        if result.outcome == "failed" and shard is not None:
            # The shard's transaction rolled back: every table is still there.
            try:
                login = self._pools.coordinator_login(shard.dsn)
                await _record(self._metadata, item, shard, login)
            except DRIVER_ERRORS as exc:
                return SharedDropped(
                    "failed", error=f"{result.error}; not registered again: {describe(exc)}"
                )
        return result

    async def _with_retries(self, item: ExpiredShared) -> SharedDropped:
        settings = self._settings
        pause = settings.retry_backoff_s
        for attempt in range(1, settings.drop_attempts + 1):
            try:
                return await self._attempt(item)
            except asyncpg.LockNotAvailableError:
                if attempt == settings.drop_attempts:
                    return SharedDropped(
                        "failed",
                        error=f"the shared tables stayed locked by other sessions "
                        f"({settings.drop_attempts} attempts of {settings.lock_timeout_ms} ms); "
                        "they are retried next run",
                    )
                await asyncio.sleep(pause)
                pause *= 2
            except archive.ArchiveError as exc:
                return SharedDropped("failed", error=f"archive: {exc}; the tables were kept")
            except DRIVER_ERRORS as exc:
                return SharedDropped("failed", error=describe(exc))
        raise AssertionError("unreachable")

    async def _attempt(self, item: ExpiredShared) -> SharedDropped:
        pool = self._pools.retention(item.entry.shard)
        async with pool.acquire() as connection, connection.transaction():
            await connection.execute(
                f"SET LOCAL lock_timeout = '{int(self._settings.lock_timeout_ms)}ms'"
            )
            await connection.execute("SET LOCAL statement_timeout = 0")
            await cancel_autovacuum_sooner(connection, self._settings.lock_timeout_ms)
            dropped, archives = [], []
            for relation in item.relations:
                name = relation_name(relation, item.entry.day)
                if await connection.fetchval("SELECT to_regclass($1)", quote_ident(name)) is None:
                    continue
                if relation in item.archive:
                    archives.append(await self._archive(connection, item, relation, name))
                await connection.execute(_DROP, quote_ident(name))
                dropped.append(name)
        outcome: Outcome = "dropped" if dropped else "already_gone"
        return SharedDropped(outcome, tuple(dropped), archives=tuple(archives))

    async def _archive(
        self, connection: Connection, item: ExpiredShared, kind: str, name: str
    ) -> str:
        """The shared table's rows, with their owners, to the archive directory; the file."""
        await connection.execute(_LOCK, quote_ident(name))
        folder = Path(self._settings.archive_dir)
        day, shard = item.entry.day, item.entry.shard
        await archive.write_shared(
            connection, kind, day, name, shard, folder, self._settings.archive_compression
        )
        return str(archive.shared_day_dir(folder, kind, day) / f"{shard}.copy.gz")
