"""Writes one part (the rows of one day table bound for one shard) in one transaction:
the day table ensured, the part claimed in the shard's ingest_ledger when the request is
idempotent, the rows loaded by binary COPY (flows through a staging table and one merge), or,
for a small part, by one INSERT with its claim (router/ingest/statements.py). Small parts bound
for one shard at once share a transaction (router/ingest/group_commit.py).

A failure is reported with whether the transaction may have committed: only a failure during
COMMIT leaves that in doubt; anything before it certainly rolled back.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import asyncpg

from router.catalog import tables as day_tables
from router.catalog.cache import CatalogCache
from router.catalog.snapshot import OwnerMapping
from router.compaction import unfold
from router.db import ddl
from router.db.connection import Connection
from router.db.copy import copy_audit_rows
from router.db.failures import DRIVER_ERRORS, describe
from router.db.names import DayTable
from router.db.pools import ShardPools
from router.ingest import statements
from router.ingest.group_commit import GroupCommit, Pending
from router.ingest.placements import SharedPlacements
from router.lru import LRU
from router.settings import IngestSettings, SharedSettings
from router.sharing import registry as sharing_registry


@dataclass
class Part:
    id: str
    table: DayTable
    rows: Sequence[Sequence[Any]]
    shard: str
    # May go into its shard's shared table of the day (router/ingest/sharing.py); the writer
    # decides by its size and what it wrote before. ``table.shared``: it goes there.
    shareable: bool = False
    # The owner's mapping, for the shard's mirror of it (shard_owners) when it goes shared.
    owner: OwnerMapping | None = None


class PartFailed(Exception):
    def __init__(self, part: Part, shard: str, cause: BaseException, in_doubt: bool) -> None:
        super().__init__(f"{shard}: {describe(cause)}")
        self.part = part
        self.shard = shard
        self.cause = cause
        self.in_doubt = in_doubt


class _Failed(Exception):
    """A shard's transaction that failed; ``in_doubt``: it may have committed."""

    def __init__(self, cause: BaseException, in_doubt: bool) -> None:
        super().__init__(describe(cause))
        self.cause = cause
        self.in_doubt = in_doubt
        # The server answered with an error before COMMIT: the transaction rolled back.
        self.refused = isinstance(cause, asyncpg.PostgresError) and not in_doubt


def _fail(pending: Pending, failure: BaseException) -> None:
    if not pending.done.done():
        pending.done.set_exception(failure)


async def _settle(pending: Pending, written: Awaitable[bool]) -> None:
    try:
        outcome = await written
    except Exception as exc:
        _fail(pending, exc)
    else:
        if not pending.done.done():
            pending.done.set_result(outcome)


class KnownTables:
    """Day tables known to exist per shard, so the hot path skips the DDL round trips. At most
    ``capacity`` of them, the least recently written forgotten first: a forgotten table's next
    write ensures and records it again (ddl.ensure_table, tables.record: both idempotent, and
    what a restarted router does for every table)."""

    def __init__(self, capacity: int) -> None:
        self._known: LRU[tuple[str, str], bool] = LRU(capacity)

    def __contains__(self, item: tuple[str, str]) -> bool:
        """Known (and now the most recently written)."""
        return self._known.get(item) is not None

    def __len__(self) -> int:
        return len(self._known)

    def add(self, shard: str, table: str) -> None:
        self._known.put((shard, table), True)

    def forget(self, shard: str, table: str) -> None:
        self._known.pop((shard, table))


class PartWriter:
    def __init__(
        self,
        pools: ShardPools,
        metadata: asyncpg.Pool,
        catalog: CatalogCache,
        settings: IngestSettings,
        shared: SharedSettings,
    ) -> None:
        """``shared``: how many day tables and placements to remember, the size a part goes
        straight to an own table at."""
        self._pools = pools
        self._metadata = metadata
        self._catalog = catalog
        self._settings = settings
        self._own_table_rows = shared.own_table_rows
        # Small owner-days go into shared tables (SHARDLOG_SHARED__ENABLED).
        self.sharing = shared.enabled
        self.tables = KnownTables(shared.known_tables)
        self.placements = SharedPlacements(metadata, shared.placement_cache)
        # Told the shard after each commit (the live tail's wake-up, router/tail/signal.py).
        self.on_commit: Callable[[str], None] | None = None
        # Told when a part bound for a shared table went to its owner-day's own table (the
        # fence said promoted): shardlog_shared_redirects_total.
        self.on_redirect: Callable[[], None] | None = None
        self._groups = (
            GroupCommit(
                self._commit_group,
                settings.group_commit_wait_ms / 1000,
                settings.group_commit_max_rows,
            )
            if settings.group_commit and settings.one_statement_rows > 0
            else None
        )

    async def write(self, part: Part, shard: str, request_key: str | None) -> bool:
        """True when the rows were written now, False when the ledger shows an earlier attempt
        committed them. Raises PartFailed."""
        part = self._placed(part, shard)
        if self._groups is not None and self._small(part, request_key):
            assert request_key is not None  # _small
            return await self._groups.write(part, shard, request_key)
        return await self._write_alone(part, shard, request_key)

    async def close(self) -> None:
        """Let the queued groups commit (at shutdown)."""
        if self._groups is not None:
            await self._groups.close()

    def _placed(self, part: Part, shard: str) -> Part:
        """The part bound for its shared table (``table.shared``), or its own table: shared
        when shareable, unless the owner-day was promoted, or the part would take the rows this
        router has sent the owner-day's shared table on that shard past
        SHARDLOG_SHARED__OWN_TABLE_ROWS, or an earlier part did. An owner-day that outgrows its
        share thus writes on in its own table at once, and the promotion job (whose survey takes
        owner-days with both an own table and shared rows) moves the rows it left shared."""
        if not part.shareable:
            return part
        placements = self.placements
        if placements.of(shard, part.table) == "promoted" or placements.outgrown(shard, part.table):
            return part
        rows = len(part.rows)
        if placements.shared_rows(shard, part.table) + rows > self._own_table_rows:
            placements.outgrew(shard, part.table)
            return part
        placements.sending(shard, part.table, rows)
        return replace(part, table=replace(part.table, own=False, shared=True))

    def _small(self, part: Part, request_key: str | None) -> bool:
        """Written by one INSERT (router/ingest/statements.py) rather than COPY."""
        return request_key is not None and 0 < len(part.rows) <= self._settings.one_statement_rows

    async def _write_alone(self, part: Part, shard: str, request_key: str | None) -> bool:
        try:
            return await self._attempt(part, shard, request_key)
        except asyncpg.UndefinedTableError:
            # The day table was dropped since we last saw it (retention): create it again and
            # retry once.
            self._forget(shard, part.table)
            return await self._attempt(part, shard, request_key)

    def _forget(self, shard: str, table: DayTable) -> None:
        if table.shared:
            self.tables.forget(shard, table.shared_name)
            self.placements.forget(shard, table)
        else:
            self.tables.forget(shard, table.name)

    async def _attempt(self, part: Part, shard: str, request_key: str | None) -> bool:
        async def load(connection: Connection) -> list[bool]:
            if request_key is not None and self._small(part, request_key):
                return [await self._write_small(connection, part, shard, request_key)]
            opened = await self._open(connection, part, shard)
            return [await self._load(connection, opened, request_key)]

        try:
            return (await self._transaction(shard, [part], load))[0]
        except _Failed as failed:
            raise PartFailed(part, shard, failed.cause, failed.in_doubt) from failed.cause

    async def _commit_group(self, shard: str, group: list[Pending]) -> None:
        """One shared transaction for the group's parts; when a statement of one of them fails
        the transaction is rolled back and each part is written again alone (in its own
        transaction), so that one part's failure takes no other down."""
        if len(group) == 1:
            only = group[0]
            await _settle(only, self._write_alone(only.part, shard, only.request_key))
            return

        async def load(connection: Connection) -> list[bool]:
            kind = group[0].part.table.kind  # a group holds one kind (group_commit.py)
            if kind == "flow":
                return await statements.write_flows(
                    connection,
                    [(p.part.table, p.part.id, p.part.rows, p.request_key) for p in group],
                    self._synchronous_commit(shard, kind),
                )
            return [
                await self._write_small(connection, p.part, shard, p.request_key) for p in group
            ]

        try:
            written = await self._transaction(shard, [p.part for p in group], load)
        except (asyncpg.UndefinedTableError, _Failed) as exc:
            if isinstance(exc, _Failed) and not exc.refused:
                for pending in group:
                    _fail(pending, PartFailed(pending.part, shard, exc.cause, exc.in_doubt))
                return
            # The server refused a statement (a day table dropped meanwhile, a constraint, a
            # timeout) and rolled the group back: each part alone, with its own outcome.
            for pending in group:
                self._forget(shard, pending.part.table)
            await asyncio.gather(
                *(_settle(p, self._write_alone(p.part, shard, p.request_key)) for p in group)
            )
            return
        for pending, now in zip(group, written, strict=True):
            if not pending.done.done():
                pending.done.set_result(now)

    async def _transaction(
        self,
        shard: str,
        parts: list[Part],
        load: Callable[[Connection], Awaitable[list[bool]]],
    ) -> list[bool]:
        """Run ``load`` in one transaction on the shard, the parts' tables ensured first. A failure
        is _Failed (in doubt when it struck during COMMIT), but for a day table dropped
        meanwhile (asyncpg.UndefinedTableError, raised as it is)."""
        committing = False
        try:
            async with self._pools.writer(shard).acquire() as connection:
                # By name and place: an owner-day may have a part for each of its tables.
                for part in {(p.table.name, p.table.shared): p for p in parts}.values():
                    await self._ensure_table(connection, shard, part.table, part.owner)
                transaction = connection.transaction()
                await transaction.start()
                try:
                    written = await load(connection)
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
            raise _Failed(exc, in_doubt=committing) from exc

    async def _write_small(
        self, connection: Connection, part: Part, shard: str, request_key: str
    ) -> bool:
        synchronous_commit = self._synchronous_commit(shard, part.table.kind)
        written = await statements.write(
            connection, part.table, part.id, part.rows, request_key, synchronous_commit
        )
        if written is not None:
            return written
        own = await self._promoted(connection, part, shard)
        again = await statements.write(
            connection, own.table, own.id, own.rows, request_key, synchronous_commit
        )
        assert again is not None  # an own table is never promoted
        return again

    async def _promoted(self, connection: Connection, part: Part, shard: str) -> Part:
        """The owner-day was moved to its own table since this router wrote it shared: the
        part goes there, in the same transaction (its table ensured in a savepoint)."""
        self.placements.promoted(shard, part.table)
        if self.on_redirect is not None:
            self.on_redirect()
        own = replace(part, table=replace(part.table, own=True, shared=False))
        await self._ensure_table(connection, shard, own.table)
        return own

    async def _open(self, connection: Connection, part: Part, shard: str) -> Part:
        """The transaction's settings and, for audit, its line in the tail log (a flow part's
        comes with its merge). A part bound for a shared table whose owner-day was promoted
        meanwhile is bound for its own table instead: the part to load."""
        synchronous_commit = self._synchronous_commit(shard, part.table.kind)
        if part.table.kind != "audit" or not part.rows:
            await connection.execute(
                "SELECT set_config('synchronous_commit', $1, true)", synchronous_commit
            )
            return part
        times = [row[0] for row in part.rows]
        if part.table.shared:
            placed = await connection.fetchval(
                statements.shared_opening_sql(part.table),
                synchronous_commit,
                part.table.shared_name,
                min(times),
                max(times),
                len(times),
                part.table.owner_id,
                column=2,
            )
            if placed:
                return part
            part = await self._promoted(connection, part, shard)
        await connection.execute(
            ddl.AUDIT_OPENING_SQL,
            synchronous_commit,
            part.table.name,
            min(times),
            max(times),
            len(times),
        )
        return part

    def _synchronous_commit(self, shard: str, kind: str) -> str:
        """'on' waits for a standby (where one is configured), 'local' does not."""
        snapshot = self._catalog.snapshot
        known = snapshot.shards.get(shard)
        group = snapshot.groups.get(known.group) if known is not None else None
        if group is None:
            return "on"
        return group.synchronous_commit(kind)

    async def _ensure_table(
        self,
        connection: Connection,
        shard: str,
        table: DayTable,
        owner: OwnerMapping | None = None,
    ) -> None:
        if table.shared:
            await self._ensure_shared(connection, shard, table, owner)
            return
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

    async def _ensure_shared(
        self, connection: Connection, shard: str, table: DayTable, owner: OwnerMapping | None
    ) -> None:
        """The shard-day's shared tables made and registered (the ahead job's, when it was
        late or the day is past), and the owner-day's owner_days row and the owner's
        owner_shards row written, before any row goes in: a search never misses committed
        rows."""
        if (shard, table.shared_name) not in self.tables:
            for relation in (table.kind, "owner_days"):
                await ddl.ensure_shared(connection, relation, table.day)
            await sharing_registry.register_shard_day(self._metadata, table.kind, table.day, shard)
            self.tables.add(shard, table.shared_name)
        await self.placements.ensure(connection, shard, table, owner)

    async def _load(self, connection: Connection, part: Part, request_key: str | None) -> bool:
        written = part.table.shared_name if part.table.shared else part.table.name
        if request_key is not None:
            claimed = await connection.fetchval(
                "INSERT INTO ingest_ledger (request_key, part, table_name, rows) "
                "VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING RETURNING true",
                request_key,
                part.id,
                written,
                len(part.rows),
            )
            if not claimed:
                return False
        if part.table.kind == "audit":
            # Into a shared table, each row's owner is the transaction's (_open).
            await copy_audit_rows(connection, written, part.rows)
        else:
            # Created in the batch's transaction: a temporary table made once per session
            # (pool init) was seen to lose its file under load (58P01).
            await connection.execute(ddl.STAGE_DDL)
            await connection.copy_records_to_table(
                ddl.FLOW_STAGE, records=part.rows, columns=ddl.FLOW_WRITE_COLUMNS
            )
            await unfold.before_merge(connection, part.table)
            await connection.execute(ddl.flow_merge_sql(part.table), part.table.name)
        return True
