"""The router's side of the live tail: one reader per shard, running while anyone subscribes.

Each reader keeps the snapshot of the shard it last read (``seen``). Woken by a NOTIFY from
whichever router wrote (router/tail/signal.py), by a write of this router, or every
SHARDLOG_TAIL__POLL_INTERVAL_S, it reads in one REPEATABLE READ transaction the tail log's
lines of the transactions its last snapshot did not see, then the rows those wrote into day
tables that some subscription covers, with every subscription's filter evaluated on the shard.
It hands each subscription its rows and moves ``seen`` on, in one step with no await: a row is
read by exactly one read of a shard, and every subscription present then receives it. A lost
notification or a broken connection only delays the next read; nothing is skipped, as the
next read starts from ``seen``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from dataclasses import replace
from datetime import datetime
from typing import Any

import asyncpg

from router import clock, memory
from router.auth.scopes import KEY_NAME
from router.catalog import owners, store
from router.catalog.cache import CatalogCache
from router.catalog.snapshot import OwnerMapping
from router.db import roles
from router.db.connection import Connection, prepare_shard_connection
from router.db.failures import DRIVER_ERRORS, describe
from router.db.names import DayTable, Kind, day_table, parse_day_table, parse_shared_table
from router.db.pools import ShardPools, connect
from router.errors import BUG_MARKER, Unavailable
from router.lru import LRU
from router.metrics import Metrics
from router.search.snapshot import ShardSnapshot
from router.settings import PoolSettings, TailSettings
from router.tail import sql
from router.tail.events import Batch, Event
from router.tail.pacing import Pacer
from router.tail.subscription import Filter, Subscription

log = logging.getLogger(__name__)

CHANNEL = "shardlog_tail"
LISTENER_APPLICATION_NAME = "shardlog-tail-listener"
# A statement evaluates at most this many filters per row; more read the rows again.
MAX_FILTERS_PER_STATEMENT = 64
_RETRY_PAUSES_S = (0.2, 0.5, 1.0, 2.0)
_FIRST_READ_DEADLINE_S = 5.0
_GIVE_BACK_AFTER_S = 1.0
_NOT_ROW = ("xid", "merged")


class Interest:
    """Which subscriptions want the rows of one owner, and under which of the distinct
    filters; cached per owner (the most recently read, TailHub's max_cached_owners) until a
    subscription comes or goes."""

    def __init__(self, subscriptions: list[Subscription]) -> None:
        self.filters: list[Filter | None] = []
        index: dict[Filter | None, int] = {}
        self.wanted: list[tuple[Subscription, int]] = []
        for subscription in subscriptions:
            number = index.get(subscription.condition)
            if number is None:
                number = index[subscription.condition] = len(self.filters)
                self.filters.append(subscription.condition)
            self.wanted.append((subscription, number))


class ShardReader:
    def __init__(self, hub: TailHub, shard: str) -> None:
        self.hub = hub
        self.shard = shard
        self.seen: ShardSnapshot | None = None
        self.wake = asyncio.Event()
        self._listener: asyncpg.Connection | None = None
        self._task: asyncio.Task[None] | None = None
        # Subscriptions that came while a read was under way (it may not deliver to them):
        # they start at that read's snapshot.
        self.reading = False
        self.joining: list[Subscription] = []
        self.stopped = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def halt(self) -> None:
        """Stops the reader at once (no await: it must happen even in a cancelled task). An
        orphaned reader would hand every row out twice."""
        self.stopped = True
        self.wake.set()
        if self._task is not None:
            self._task.cancel()

    async def stop(self) -> None:
        self.halt()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._close_listener()

    async def _close_listener(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None and not listener.is_closed():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(listener.close(), 2)

    async def _run(self) -> None:
        failures = 0
        loop = asyncio.get_running_loop()
        read_at = loop.time()
        while not self.stopped:
            try:
                if self._listener is None or self._listener.is_closed():
                    await self._listen()
                self.wake.clear()
                read_at = loop.time()
                await self._read()
                failures = 0
            except Exception as exc:
                # A reader that died would leave every stream short of this shard's rows (and
                # a resume waiting for it): whatever fails is retried. An error that is not a
                # shard's (a driver error, or a shard without a pool yet) is a bug: logged so.
                pause = _RETRY_PAUSES_S[min(failures, len(_RETRY_PAUSES_S) - 1)]
                failures += 1
                expected = isinstance(exc, (*DRIVER_ERRORS, Unavailable))
                if not expected:
                    log.exception("%s: tail: reading %s failed", BUG_MARKER, self.shard)
                elif failures in (1, 10) or failures % 100 == 0:
                    log.warning(
                        "tail: reading %s failed (%s); again in %g s",
                        self.shard,
                        describe(exc),
                        pause,
                    )
                self.hub.metrics.tail_read_failures.labels(self.shard).inc()
                await self._close_listener()
                await asyncio.sleep(pause)
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.hub.settings.poll_interval_s):
                    await self.wake.wait()
            # Commits close together (every write NOTIFYs) make one read, not one each.
            await asyncio.sleep(read_at + self.hub.settings.read_interval_s - loop.time())

    async def _listen(self) -> None:
        known = self.hub.catalog.snapshot.shards.get(self.shard)
        if known is None:
            return
        listener = await connect(known.dsn, self.hub.pool_settings, role=roles.READER)
        try:
            await prepare_shard_connection(listener)
            await listener.add_listener(CHANNEL, self._on_notify)
        except BaseException:
            listener.terminate()
            raise
        self._listener = listener

    def _on_notify(self, _connection: Any, _pid: int, _channel: str, _payload: object) -> None:
        self.wake.set()

    def join(self, subscription: Subscription) -> None:
        if self.reading or self.seen is None:
            self.joining.append(subscription)
        else:
            subscription.started(self.shard, self.seen)

    def _joined(self) -> None:
        joining, self.joining = self.joining, []
        for subscription in joining:
            if self.seen is not None:
                subscription.started(self.shard, self.seen)
            else:
                self.joining.append(subscription)

    async def _read(self) -> None:
        self.reading = True
        try:
            await self._read_once()
        finally:
            self.reading = False
            self._joined()

    async def _read_once(self) -> None:
        # The listening session reads too (on the primary, as NOTIFY needs): no pool
        # checkout and reset per read.
        if self._listener is not None and not self._listener.is_closed():
            await self._read_on(self._listener)
            return
        async with self.hub.pools.reader(self.shard, primary=True).acquire() as connection:
            await self._read_on(connection)

    async def _read_on(self, connection: Connection) -> None:
        async with connection.transaction(isolation="repeatable_read", readonly=True):
            now = ShardSnapshot.parse(await connection.fetchval(sql.CURRENT_SNAPSHOT))
            if self.seen is None:
                self.seen = now
                return
            start = self.seen
            text, params = sql.log_sql(start, None)
            lines = await connection.fetch(text, *params)
            read = await self.hub.read_rows(connection, self.shard, start, lines)
        if self.stopped:
            return
        self.hub.dispatch(self.shard, start, now, read)
        self.seen = now


class Read:
    """What one read of a shard found: per owner, the rows and who wants them."""

    def __init__(self) -> None:
        self.rows: list[tuple[Interest, OwnerMapping, list[asyncpg.Record]]] = []
        self.committed_at: dict[int, datetime] = {}
        self.read_at = clock.time()


class TailHub:
    def __init__(
        self,
        catalog: CatalogCache,
        pools: ShardPools,
        metadata: asyncpg.Pool,
        pool_settings: PoolSettings,
        settings: TailSettings,
        metrics: Metrics,
        max_cached_owners: int = owners.MAX_CACHED,
    ) -> None:
        """``max_cached_owners``: the bound of each per-owner cache (mappings, interests)."""
        self.catalog = catalog
        self.pools = pools
        self.metadata = metadata
        self.pool_settings = pool_settings
        self.settings = settings
        self.metrics = metrics
        self.subscriptions: set[Subscription] = set()
        self._readers: dict[str, ShardReader] = {}
        # Per owner met in the tail log, by (kind, owner id).
        self._interest: LRU[tuple[str, int], Interest] = LRU(max_cached_owners)
        self._owners: LRU[tuple[str, int], OwnerMapping | None] = LRU(max_cached_owners)
        self._lock = asyncio.Lock()
        self.pacer = Pacer()

    # --- subscriptions -----------------------------------------------------------------

    async def subscribe(self, subscription: Subscription) -> dict[str, ShardSnapshot]:
        """Adds ``subscription``; every row committed after the returned snapshots (per shard)
        reaches it. A shard not read within a few seconds (or marked down) may be missing from
        them: its rows count from the hub's first read of it."""
        async with self._lock:
            self._sync_readers()
            self.subscriptions.add(subscription)
            self._interest.clear()
            self.metrics.tail_subscribers.set(len(self.subscriptions))
            # A shard marked down takes no writes: nobody waits for its first read.
            shards = self.catalog.snapshot.shards
            subscription.expect(
                n for n in self._readers if n in shards and shards[n].state != "down"
            )
            for reader in self._readers.values():
                reader.join(subscription)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(subscription.all_started.wait(), _FIRST_READ_DEADLINE_S)
        return dict(subscription.start)

    async def unsubscribe(self, subscription: Subscription) -> None:
        """Everything but the readers' clean-up happens before the first await: a stream's
        task is often cancelled already when it unsubscribes."""
        self.subscriptions.discard(subscription)
        subscription.turn.close()
        self._interest.clear()
        for reader in self._readers.values():
            if subscription in reader.joining:
                reader.joining.remove(subscription)
        self.metrics.tail_subscribers.set(len(self.subscriptions))
        if self.subscriptions:
            return
        readers, self._readers = self._readers, {}
        for reader in readers.values():
            reader.halt()
        # Once the last streams' connections are gone too (a second later).
        asyncio.get_running_loop().call_later(_GIVE_BACK_AFTER_S, self._give_back)
        await asyncio.shield(asyncio.gather(*(r.stop() for r in readers.values())))

    def _give_back(self) -> None:
        if not self.subscriptions:
            memory.give_back()

    async def on_catalog(self, _snapshot: object) -> None:
        """Shards that joined the catalog get a reader (their rows are all new); those that
        left lose theirs."""
        async with self._lock:
            if not self.subscriptions:
                return
            self._sync_readers()
            shards = self.catalog.snapshot.shards
            gone = [self._readers.pop(name) for name in self._readers.keys() - shards.keys()]
            for reader in gone:
                reader.halt()
            await asyncio.gather(*(r.stop() for r in gone))

    def _sync_readers(self) -> None:
        shards = self.catalog.snapshot.shards
        for name in shards.keys() - self._readers.keys():
            reader = self._readers[name] = ShardReader(self, name)
            reader.start()

    def seen(self) -> dict[str, ShardSnapshot]:
        return {n: r.seen for n, r in self._readers.items() if r.seen is not None}

    def wake(self, shard: str) -> None:
        reader = self._readers.get(shard)
        if reader is not None:
            reader.wake.set()

    async def stop(self) -> None:
        readers, self._readers = self._readers, {}
        for reader in readers.values():
            reader.halt()
        await asyncio.gather(*(r.stop() for r in readers.values()))

    # --- reading -----------------------------------------------------------------------

    async def mappings(self, kind: str, ids: set[int]) -> dict[int, OwnerMapping | None]:
        """The mapping of each owner id (None: no such owner), remembered for the next reads."""
        result = {i: self._owners.get((kind, i)) for i in ids if (kind, i) in self._owners}
        missing = [i for i in ids if i not in result]
        if missing:
            found = await store.owners_by_id(self.metadata, kind, missing)
            for owner_id in missing:
                result[owner_id] = found.get(owner_id)
                self._owners.put((kind, owner_id), result[owner_id])
        return result

    def cached_owners(self) -> int:
        return len(self._owners)

    def cached_interests(self) -> int:
        return len(self._interest)

    def interest(self, mapping: OwnerMapping) -> Interest:
        cached = self._interest.get((mapping.kind, mapping.id))
        if cached is None:
            cached = Interest(
                [
                    s
                    for s in self.subscriptions
                    if s.spec.kind == mapping.kind and s.spec.covers(mapping)
                ]
            )
            self._interest.put((mapping.kind, mapping.id), cached)
        return cached

    async def read_rows(
        self, connection: Connection, shard: str, start: ShardSnapshot, lines: list[asyncpg.Record]
    ) -> Read:
        """The rows the tail log's ``lines`` wrote, of owners some subscription covers, each
        with the filters it matches."""
        read = Read()
        read.committed_at = {line["xid"]: line["logged_at"] for line in lines}
        ranges = await with_own_tables(connection, written_ranges(lines))
        by_kind: dict[str, set[int]] = defaultdict(set)
        for table in ranges:
            by_kind[table.kind].add(table.owner_id)
        mappings = {kind: await self.mappings(kind, ids) for kind, ids in by_kind.items()}
        for table, (first, last) in sorted(ranges.items()):
            mapping = mappings[table.kind].get(table.owner_id)
            if mapping is None:
                continue
            interest = self.interest(mapping)
            if not interest.wanted:
                continue
            records: list[asyncpg.Record] = []
            for offset in range(0, len(interest.filters), MAX_FILTERS_PER_STATEMENT):
                chunk = interest.filters[offset : offset + MAX_FILTERS_PER_STATEMENT]
                text, params = sql.rows_sql(table, first, last, start, chunk)
                found = await connection.fetch(text, *params)
                records = found if offset == 0 else _joined(records, found, offset)
            if records:
                read.rows.append((interest, mapping, records))
        return read

    @staticmethod
    def rows(shard: str, read: Read, records: list[Any], mapping: OwnerMapping) -> list[Event]:
        """One event per record (of one owner), to be shared by the subscriptions that want
        it: ``Event.copy`` gives each its own, with the row and its rendering shared."""
        out = []
        key_name = KEY_NAME[mapping.kind]
        for record in records:
            row = {k: v for k, v in record.items() if k not in _NOT_ROW and not _is_flag(k)}
            row["shard"] = shard
            row[key_name] = mapping.key
            row["owner_id"] = mapping.id
            xid = record["xid"]
            committed = read.committed_at.get(xid)
            out.append(
                Event(
                    (row["ts"], shard, mapping.id, row["id"], xid),
                    row,
                    record["merged"],
                    committed_at=committed.timestamp() if committed else read.read_at,
                    rendered=[],
                )
            )
        return out

    def batches_for(self, shard: str, read: Read) -> dict[Subscription, list[list[Event]]]:
        """Each subscription's events of one read, as lists shared by the subscriptions of
        the same filter: a row is read, built and filtered once whoever wants it."""
        per: dict[Subscription, list[list[Event]]] = defaultdict(list)
        for interest, mapping, records in read.rows:
            shared = self.rows(shard, read, records, mapping)
            matching = [
                [e for e, r in zip(shared, records, strict=True) if r.get(f"m{number}")]
                for number in range(len(interest.filters))
            ]
            for subscription, number in interest.wanted:
                if matching[number]:
                    per[subscription].append(matching[number])
        return per

    def dispatch(self, shard: str, start: ShardSnapshot, end: ShardSnapshot, read: Read) -> None:
        """Hands every subscription its events of one read (no await: none comes or goes
        meanwhile). A constant cost per subscription: the work per row and subscription is
        its stream's, in its turn (router/tail/pacing.py)."""
        seen = self.seen()
        for subscription, parts in self.batches_for(shard, read).items():
            if subscription not in self.subscriptions:
                continue
            batch = Batch(shard, start, read.read_at, end)
            if not subscription.deliver(batch, parts, seen):
                self.metrics.tail_overflows.inc()


def written_ranges(
    lines: list[asyncpg.Record], kind: str | None = None
) -> dict[DayTable, tuple[datetime, datetime]]:
    """The owner-days (of ``kind``, else of both) that the tail log's ``lines`` name, each with
    the time range its writes covered: a line of a day table names it, a line of a shared
    table names the table and the owner whose rows it wrote (``DayTable.shared``); an
    owner-day written in both places is read in both."""
    ranges: dict[DayTable, tuple[datetime, datetime]] = {}
    places: dict[DayTable, tuple[bool, bool]] = {}
    for line in lines:
        table = _written_table(line)
        if table is None or (kind is not None and table.kind != kind):
            continue
        first, last = ranges.get(table, (line["first_ts"], line["last_ts"]))
        ranges[table] = (min(first, line["first_ts"]), max(last, line["last_ts"]))
        own, shared = places.get(table, (False, False))
        places[table] = (own or table.own, shared or table.shared)
    return {
        replace(table, own=places[table][0], shared=places[table][1]): span
        for table, span in ranges.items()
    }


async def with_own_tables(
    connection: Connection | asyncpg.Pool, ranges: dict[DayTable, tuple[datetime, datetime]]
) -> dict[DayTable, tuple[datetime, datetime]]:
    """``ranges`` with the own tables of the owner-days written shared, where they exist: a
    promotion moves an owner-day's rows from the shared table to its own (the table made
    first) without a tail-log line, so rows logged as shared may be read there."""
    shared = {table.name: table for table in ranges if table.shared and not table.own}
    if not shared:
        return ranges
    found = {
        r["relname"]
        for r in await connection.fetch(
            "SELECT relname FROM pg_class WHERE relname = ANY($1::text[])", list(shared)
        )
    }
    return {
        (replace(table, own=True) if table.name in found else table): span
        for table, span in ranges.items()
    }


def _written_table(line: asyncpg.Record) -> DayTable | None:
    table = parse_day_table(line["table_name"])
    if table is not None:
        return table
    shared = parse_shared_table(line["table_name"])
    owner_id = line["owner_id"]
    if shared is None or shared[0] == "owner_days" or owner_id is None:
        return None
    kind: Kind = "audit" if shared[0] == "audit" else "flow"
    return replace(day_table(kind, owner_id, shared[1]), own=False, shared=True)


def _joined(records: list[Any], more: list[Any], offset: int) -> list[Any]:
    """The rows of two statements over the same rows with different filters, by id: the
    flags of the second renumbered after the first's."""
    merged: dict[int, dict[str, Any]] = {r["id"]: dict(r) for r in records}
    for record in more:
        row = merged.setdefault(record["id"], {k: v for k, v in record.items() if not _is_flag(k)})
        for key, value in record.items():
            if _is_flag(key):
                row[f"m{int(key[1:]) + offset}"] = value
    return list(merged.values())


def _is_flag(name: str) -> bool:
    return name[:1] == "m" and name[1:].isdigit()
