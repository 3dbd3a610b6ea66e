"""Writes one part (the rows of one day table bound for one shard) in one transaction:
the day table ensured, the part claimed in the shard's ingest_ledger when the request is
idempotent, the rows loaded by binary COPY (flows through a staging table and one merge).

A failure is reported with whether the transaction may have committed: only a failure during
COMMIT leaves that in doubt; anything before it certainly rolled back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from router.catalog import tables as day_tables
from router.catalog.cache import CatalogCache
from router.db import ddl
from router.db.connection import Connection
from router.db.failures import DRIVER_ERRORS, describe
from router.db.names import DayTable
from router.db.pools import ShardPools
from router.settings import IngestSettings


@dataclass
class Part:
    id: str
    table: DayTable
    rows: Sequence[Sequence[Any]]
    shard: str


class PartFailed(Exception):
    def __init__(self, part: Part, shard: str, cause: BaseException, in_doubt: bool) -> None:
        super().__init__(f"{shard}: {describe(cause)}")
        self.part = part
        self.shard = shard
        self.cause = cause
        self.in_doubt = in_doubt


class KnownTables:
    """Day tables known to exist per shard, so the hot path skips the DDL round trips."""

    def __init__(self) -> None:
        self._known: set[tuple[str, str]] = set()

    def __contains__(self, item: tuple[str, str]) -> bool:
        return item in self._known

    def add(self, shard: str, table: str) -> None:
        self._known.add((shard, table))

    def forget(self, shard: str, table: str) -> None:
        self._known.discard((shard, table))


class PartWriter:
    def __init__(
        self,
        pools: ShardPools,
        metadata: asyncpg.Pool,
        catalog: CatalogCache,
        settings: IngestSettings,
    ) -> None:
        self._pools = pools
        self._metadata = metadata
        self._catalog = catalog
        self._settings = settings
        self.tables = KnownTables()
        # Told the shard after each commit (the live tail's wake-up, router/tail/signal.py).
        self.on_commit: Callable[[str], None] | None = None

    async def write(self, part: Part, shard: str, request_key: str | None) -> bool:
        """True when the rows were written now, False when the ledger shows an earlier attempt
        committed them. Raises PartFailed."""
        try:
            return await self._attempt(part, shard, request_key)
        except asyncpg.UndefinedTableError:
            # The day table was dropped since we last saw it (retention): create it again and
            # retry once.
            self.tables.forget(shard, part.table.name)
            return await self._attempt(part, shard, request_key)

    async def _attempt(self, part: Part, shard: str, request_key: str | None) -> bool:
        committing = False
        try:
            async with self._pools.writer(shard).acquire() as connection:
                await self._ensure_table(connection, shard, part.table)
                transaction = connection.transaction()
                await transaction.start()
                try:
                    await self._open(connection, part, shard)
                    written = await self._load(connection, part, request_key)
                    committing = True
                    await transaction.commit()
                    if self.on_commit is not None:
                        self.on_commit(shard)
                    return written
                except asyncpg.PostgresError:
                    if not committing:
                        with contextlib.suppress(Exception):
                            await transaction.rollback()
                    raise
                except BaseException:
                    # Broken or interrupted mid-operation (e.g. mid-COPY), the connection's
                    # protocol state is unknown: it must not go back to the pool.
                    connection.terminate()
                    raise
        except asyncpg.UndefinedTableError:
            raise
        except DRIVER_ERRORS as exc:
            raise PartFailed(part, shard, exc, in_doubt=committing) from exc

    async def _open(self, connection: Connection, part: Part, shard: str) -> None:
        """The transaction's settings and, for audit, its line in the tail log (a flow part's
        comes with its merge)."""
        synchronous_commit = self._synchronous_commit(shard, part.table.kind)
        if part.table.kind != "audit" or not part.rows:
            await connection.execute(
                "SELECT set_config('synchronous_commit', $1, true)", synchronous_commit
            )
            return
        times = [row[0] for row in part.rows]
        await connection.execute(
            ddl.AUDIT_OPENING_SQL,
            synchronous_commit,
            part.table.name,
            min(times),
            max(times),
            len(times),
        )

    def _synchronous_commit(self, shard: str, kind: str) -> str:
        """'on' waits for a standby (where one is configured), 'local' does not."""
        snapshot = self._catalog.snapshot
        known = snapshot.shards.get(shard)
        group = snapshot.groups.get(known.group) if known is not None else None
        if group is None:
            return "on"
        return group.synchronous_commit(kind)

    async def _ensure_table(self, connection: Connection, shard: str, table: DayTable) -> None:
        if (shard, table.name) in self.tables:
            return
        index = self._settings.audit_index if table.kind == "audit" else self._settings.flow_index
        await ddl.ensure_table(connection, table, index)
        # Recorded before any row goes in, so a search never misses committed rows.
        known = self._catalog.snapshot.shards[shard]
        await day_tables.record(
            self._metadata, table, known, self._pools.coordinator_login(known.dsn)
        )
        self.tables.add(shard, table.name)

    async def _load(self, connection: Connection, part: Part, request_key: str | None) -> bool:
        if request_key is not None:
            claimed = await connection.fetchval(
                "INSERT INTO ingest_ledger (request_key, part, table_name, rows) "
                "VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING RETURNING true",
                request_key,
                part.id,
                part.table.name,
                len(part.rows),
            )
            if not claimed:
                return False
        if part.table.kind == "audit":
            await connection.copy_records_to_table(
                part.table.name, records=part.rows, columns=ddl.AUDIT_COLUMNS
            )
        else:
            # Created in the batch's transaction: a temporary table made once per session
            # (pool init) was seen to lose its file under load (58P01).
            await connection.execute(ddl.STAGE_DDL)
            await connection.copy_records_to_table(
                ddl.FLOW_STAGE, records=part.rows, columns=ddl.FLOW_WRITE_COLUMNS
            )
            await connection.execute(ddl.flow_merge_sql(part.table), part.table.name)
        return True
