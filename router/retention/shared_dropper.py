"""Drops an expired shared day on one shard (docs/architecture.md, "Retention, erase,
archive"): its registry entries and coordinator children first (so no search plans or reads
it), then its shared tables and owner_days table in one transaction on the shard, through the
retention role's only way to drop them (shardlog_drop_shared_table), each lock awaited at most
lock_timeout, attempts repeated with a growing pause and then given up (the next run tries
again, and the entries and children are put back)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import asyncpg

from router.catalog.snapshot import CatalogSnapshot, Shard
from router.db.failures import DRIVER_ERRORS, describe
from router.db.names import quote_ident
from router.db.pools import CoordinatorLogin, ShardPools
from router.retention.dropper import Outcome, cancel_autovacuum_sooner
from router.retention.shared_days import ExpiredShared, relation_name
from router.search import fdw
from router.settings import RetentionSettings

_DROP = "SELECT shardlog_drop_shared_table($1::regclass)"


@dataclass(frozen=True)
class SharedDropped:
    outcome: Outcome
    tables: tuple[str, ...] = ()  # what this attempt dropped
    error: str | None = None


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
            dropped = []
            for relation in item.relations:
                name = relation_name(relation, item.entry.day)
                if await connection.fetchval("SELECT to_regclass($1)", quote_ident(name)) is None:
                    continue
                await connection.execute(_DROP, quote_ident(name))
                dropped.append(name)
        return SharedDropped("dropped" if dropped else "already_gone", tuple(dropped))
