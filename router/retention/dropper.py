"""Drops one day table on its shard, lock-safely: every attempt waits at most lock_timeout for
the table's lock, so a long search or a busy insert neither blocks the drop for long nor is
blocked by it for long; attempts repeat with a growing pause and then give up (the next run
tries again). Optionally archives the table first, in the same transaction, under a SHARE lock
that keeps writers out while readers go on.

The registry entry and the fdw foreign table go first (in one metadata transaction), so no new
search plans the table; if the drop then fails they are put back.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import asyncpg

from router.catalog import tables as day_tables
from router.catalog.snapshot import CatalogSnapshot
from router.compaction.registry import switch as compaction_switch
from router.db.connection import Connection
from router.db.failures import DRIVER_ERRORS, describe
from router.db.names import DayTable
from router.db.pools import ShardPools
from router.retention import archive
from router.search import fdw
from router.settings import RetentionSettings

log = logging.getLogger(__name__)

_ERRORS = DRIVER_ERRORS
Outcome = Literal["dropped", "already_gone", "failed"]


@dataclass(frozen=True)
class Dropped:
    outcome: Outcome
    rows: int | None = None
    bytes: int | None = None
    archive: str | None = None
    error: str | None = None


class _LockBusy(Exception):
    pass


_LOCK = "SELECT shardlog_lock_day_table($1::regclass, $2)"
_DROP = "SELECT shardlog_drop_day_table($1::regclass)"

# Tables up to this size are counted exactly before the drop (milliseconds); larger ones report
# the row count of the table statistics, which lag recent writes by seconds at most.
EXACT_COUNT_MAX_BYTES = 8 * 2**20


async def _row_count(connection: Connection, table: DayTable) -> int:
    source = await archive.readable(connection, table)
    if source != table.quoted:
        counted: int = await connection.fetchval(f"SELECT count(*) FROM {source}")
        return counted
    size: int = await connection.fetchval("SELECT pg_relation_size($1::regclass)", table.quoted)
    if size <= EXACT_COUNT_MAX_BYTES:
        exact: int = await connection.fetchval(f"SELECT count(*) FROM {table.quoted}")
        return exact
    estimate: int = await connection.fetchval(
        "SELECT greatest(coalesce(s.n_live_tup, 0), c.reltuples::bigint, 0) "
        "FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid "
        "WHERE c.oid = $1::regclass",
        table.quoted,
    )
    return estimate


async def cancel_autovacuum_sooner(connection: Connection, lock_timeout_ms: int) -> None:
    """An autovacuum of the table (likely soon after a bulk load) holds a lock the DROP waits
    for; PostgreSQL cancels it for a waiter only after deadlock_timeout (1 s by default), which
    is longer than our lock_timeout, so the drop would retry until the vacuum ends (seconds on
    a big table). Waiting less before the deadlock check lets the cancel happen. Only a role
    granted SET on deadlock_timeout may change it (the retention role is, at bring-up); others
    keep the retries."""
    if await connection.fetchval("SELECT has_parameter_privilege('deadlock_timeout', 'SET')"):
        wait_ms = max(10, min(100, lock_timeout_ms // 2))
        await connection.execute(f"SET LOCAL deadlock_timeout = '{wait_ms}ms'")


async def forget(metadata: asyncpg.Pool, table: DayTable, shard: str) -> str | None:
    """Remove a table from the registry and the fdw coordinator; its layout, if it was there."""
    async with metadata.acquire() as connection, connection.transaction():
        layout: str | None = await connection.fetchval(
            "DELETE FROM day_tables WHERE kind = $1 AND owner_id = $2 AND day = $3 AND shard = $4 "
            "RETURNING layout",
            table.kind,
            table.owner_id,
            table.day,
            shard,
        )
        await fdw.detach(connection, table, shard)
    return layout


class Dropper:
    def __init__(
        self, metadata: asyncpg.Pool, pools: ShardPools, settings: RetentionSettings
    ) -> None:
        self._metadata = metadata
        self._pools = pools
        self._settings = settings

    async def drop(
        self,
        snapshot: CatalogSnapshot,
        table: DayTable,
        shard: str,
        owner: str | None = None,
        archive_first: bool = False,
    ) -> Dropped:
        try:
            layout = await forget(self._metadata, table, shard)
        except _ERRORS as exc:
            return Dropped("failed", error=f"metadata: {describe(exc)}")
        result = await self._drop_with_retries(table, shard, owner, archive_first)
        if result.outcome == "failed" and shard in snapshot.shards:
            try:
                known = snapshot.shards[shard]
                await day_tables.record(
                    self._metadata, table, known, self._pools.coordinator_login(known.dsn)
                )
                if layout == "compacted":
                    await compaction_switch(self._metadata, [table], shard)
            except _ERRORS as exc:
                log.warning(
                    "%s on %s was not dropped and could not be re-registered: %s "
                    "(run 'shardlog tables sync')",
                    table.name,
                    shard,
                    describe(exc),
                )
        return result

    async def _drop_with_retries(
        self, table: DayTable, shard: str, owner: str | None, archive_first: bool
    ) -> Dropped:
        settings = self._settings
        pause = settings.retry_backoff_s
        for attempt in range(1, settings.drop_attempts + 1):
            try:
                return await self._attempt(table, shard, owner, archive_first)
            except _LockBusy:
                if attempt == settings.drop_attempts:
                    return Dropped(
                        "failed",
                        error=f"the table stayed locked by other sessions "
                        f"({settings.drop_attempts} attempts of {settings.lock_timeout_ms} ms); "
                        "it is retried next run",
                    )
                await asyncio.sleep(pause)
                pause *= 2
            except archive.ArchiveError as exc:
                return Dropped("failed", error=f"archive: {exc}; the table was kept")
            except _ERRORS as exc:
                return Dropped("failed", error=describe(exc))
        raise AssertionError("unreachable")

    async def _attempt(
        self, table: DayTable, shard: str, owner: str | None, archive_first: bool
    ) -> Dropped:
        async with self._pools.retention(shard).acquire() as connection, connection.transaction():
            await connection.execute(
                f"SET LOCAL lock_timeout = '{int(self._settings.lock_timeout_ms)}ms'"
            )
            await connection.execute("SET LOCAL statement_timeout = 0")
            await cancel_autovacuum_sooner(connection, self._settings.lock_timeout_ms)
            try:
                if await connection.fetchval("SELECT to_regclass($1)", table.quoted) is None:
                    return Dropped("already_gone")
                stored = None
                # The retention role may lock and drop day tables only through these two
                # functions (schema/shard/0003_roles.sql); a name that vanished is 42P01.
                if archive_first:
                    await connection.execute(_LOCK, table.quoted, "SHARE")
                    manifest = await archive.write(
                        connection,
                        table,
                        shard,
                        owner,
                        Path(self._settings.archive_dir),
                        self._settings.archive_compression,
                    )
                    stored = str(archive.data_path(Path(self._settings.archive_dir), table, shard))
                    rows: int = manifest.rows
                else:
                    await connection.execute(_LOCK, table.quoted, "ACCESS EXCLUSIVE")
                    rows = await _row_count(connection, table)
                size: int = await connection.fetchval(
                    "SELECT pg_total_relation_size($1::regclass) + coalesce((SELECT packed_bytes "
                    "FROM compacted_days WHERE kind = $2 AND owner_id = $3 AND day = $4), 0)",
                    table.quoted,
                    table.kind,
                    table.owner_id,
                    table.day,
                )
                await connection.execute(_DROP, table.quoted)
            except asyncpg.LockNotAvailableError:
                raise _LockBusy from None
            except asyncpg.UndefinedTableError:
                return Dropped("already_gone")
        return Dropped("dropped", rows, size, stored)
