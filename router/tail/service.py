"""A tail stream from subscription to its end: the replay (``from``) or the catch-up of a
resume, then live rows as they leave the subscription's buffer, as Server-Sent Events.

What a stream promises (docs/api.md "Live tail"): every matching row committed after the
subscription started (for a resume: after what its cursor says was sent) is sent exactly
once; a replay sends the rows the shards held at the start, from ``from`` on, in order, then
the live rows with no gap and no repeat at the seam.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar

import asyncpg
import orjson

from router import clock
from router.auth.scopes import KEY_NAME, check_key, check_key_prefix
from router.catalog.owners import OwnerDirectory
from router.catalog.snapshot import OwnerMapping
from router.db.failures import DRIVER_ERRORS, describe
from router.db.names import DayTable
from router.errors import BadRequest, Overloaded, Unavailable
from router.metrics import Metrics
from router.search import coverage
from router.search.cursor import Position, query_digest
from router.search.query import AuditQuery
from router.search.service import SearchService
from router.search.snapshot import Pin, ShardSnapshot
from router.settings import TailSettings
from router.tail import sql
from router.tail.events import Event, EventKey
from router.tail.hub import TailHub, with_own_tables, written_ranges
from router.tail.ordering import Buffer, Claim, Marks
from router.tail.position import TailCursorCodec, TailPosition
from router.tail.subscription import Subscription, TailSpec

log = logging.getLogger(__name__)

T = TypeVar("T")
REPLAY_PAGE_ROWS = 1000
# A turn of a live stream (router/tail/pacing.py): steps of at most TURN_ROWS rows moved into
# its buffer or sent, while it has taken less than TURN_S of the event loop.
TURN_ROWS = 16
TURN_S = 0.0005
_CATCH_UP_PAUSE_S = 1.0


def frame(data: Any, event_id: str | None = None, event: str | None = None) -> bytes:
    return raw_frame(orjson.dumps(data), event_id, event)


def raw_frame(data: bytes, event_id: str | None = None, event: str | None = None) -> bytes:
    """One event; ``data`` is JSON (one line: JSON text holds no raw newline)."""
    head = b""
    if event is not None:
        head += b"event: " + event.encode() + b"\n"
    if event_id is not None:
        head += b"id: " + event_id.encode() + b"\n"
    return head + b"data: " + data + b"\n\n"


class TailService:
    def __init__(
        self,
        hub: TailHub,
        search: SearchService,
        owners: OwnerDirectory,
        settings: TailSettings,
        metrics: Metrics,
    ) -> None:
        self.hub = hub
        self.owners = owners
        self.search = search
        self.settings = settings
        self.metrics = metrics
        self._codec: TailCursorCodec | None = None

    @property
    def codec(self) -> TailCursorCodec:
        if self._codec is None:
            self._codec = TailCursorCodec(self.search.secret, self.settings.log_keep_s)
        return self._codec

    @staticmethod
    def digest(spec: TailSpec) -> str:
        condition = spec.condition()
        return query_digest(
            {
                "tail": spec.kind,
                "filter": None if condition is None else dataclasses.asdict(condition),
                "keys": dataclasses.asdict(spec.keys),
                "reach": coverage.visibility(spec.kind, spec.keys, spec.grant),
            }
        )

    async def open(
        self,
        spec: TailSpec,
        after: str | None,
        replay_from: datetime | None,
        limit: int | None = None,
        duration_s: float | None = None,
        after_field: str = "after",
    ) -> AsyncIterator[bytes]:
        """Subscribes (refusing with 429 past SHARDLOG_TAIL__MAX_SUBSCRIPTIONS, 400 for a
        cursor it cannot continue) and returns the stream's frames."""
        if len(self.hub.subscriptions) >= self.settings.max_subscriptions:
            raise Overloaded(
                f"this router serves {self.settings.max_subscriptions} tail streams "
                "(SHARDLOG_TAIL__MAX_SUBSCRIPTIONS): retry later or on another router",
                retry_after_s=5,
            )
        await self._check_access(spec)
        await self._check_patterns(spec)
        digest = self.digest(spec)
        position = (
            self.codec.decode(after, digest, after_field, clock.time())
            if after is not None
            else None
        )
        buffer = Buffer(self.settings.watermark_s, self.settings.max_buffered_events)
        # A new stream is live at once: an overflow before its first row must still yield the
        # marks of the shards the hub has read since (its first cursor may predate a shard's
        # first read). A replay or a resume goes live when it has caught up.
        buffer.live = position is None and replay_from is None
        subscription = Subscription(spec, buffer, self.hub.pacer.turn())
        starts = await self.hub.subscribe(subscription)
        stream = Stream(self, subscription, digest, starts)
        stream.resume_id = after
        if duration_s is not None:
            stream.deadline = asyncio.get_running_loop().time() + duration_s
        return self._stream(stream, position, replay_from, limit)

    async def _check_access(self, spec: TailSpec) -> None:
        """As a search: a named key or a prefix the token may not reach is a 403 naming the
        field (keys it covers later, by a prefix or no key, pass the same check row by row)."""
        field = KEY_NAME[spec.kind]
        for key in spec.keys.listed:
            check_key(spec.grant, spec.kind, key, None, field)
        found = await self.owners.lookup_many(spec.kind, spec.keys.listed)
        for key, mapping in found.items():
            check_key(spec.grant, spec.kind, key, mapping.tenant, field)
        if spec.keys.prefix is not None:
            check_key_prefix(spec.grant, spec.kind, spec.keys.prefix, f"{field}_prefix")

    async def _check_patterns(self, spec: TailSpec) -> None:
        """A regular expression PostgreSQL refuses is a 400 naming ``q`` now: later it would
        fail every read of the shards."""
        query = spec.query
        if not isinstance(query, AuditQuery) or query.match == "substring":
            return
        operator = "~" if query.match == "regex" else "~*"
        for pattern in query.patterns:
            try:
                await self.hub.metadata.fetchval(f"SELECT '' {operator} $1", pattern)
            except asyncpg.InvalidRegularExpressionError as exc:
                raise BadRequest(f"invalid regular expression: {exc}", "q") from None

    async def _stream(
        self,
        stream: Stream,
        position: TailPosition | None,
        replay_from: datetime | None,
        limit: int | None,
    ) -> AsyncIterator[bytes]:
        """The stream's bytes: its frames, ended after ``limit`` rows when one is given."""
        left = limit
        loop = asyncio.get_running_loop()
        try:
            async for frames in self._frames(stream, position, replay_from):
                if stream.deadline is not None and loop.time() >= stream.deadline:
                    yield b"".join(frames)
                    return
                if left is not None:
                    rows = [n for n, f in enumerate(frames) if f[:3] in (b"id:", b"dat")]
                    if len(rows) >= left:
                        yield b"".join(frames[: rows[left - 1] + 1])
                        return
                    left -= len(rows)
                yield b"".join(frames)
        finally:
            await self.hub.unsubscribe(stream.subscription)

    async def _frames(
        self, stream: Stream, position: TailPosition | None, replay_from: datetime | None
    ) -> AsyncIterator[list[bytes]]:
        yield [b"retry: 2000\n\n"]
        # Shards the hub had not read yet (down, or slow to answer): their rows count from its
        # first read of them.
        pending = sorted(self.hub.catalog.snapshot.shards.keys() - stream.starts.keys())
        hello = {"subscribed": True, "shards": sorted(stream.starts), "pending_shards": pending}
        if position is None:
            first = TailPosition(stream.starts, {}, None, clock.time(), replay_from)
            stream.resume_id = stream.encode(self.codec.shard_part(first), None)
            yield [frame(hello, stream.resume_id, "subscribed")]
            if replay_from is not None:
                async for frames in stream.replay(stream.starts, replay_from, None):
                    yield frames
        else:
            yield [frame(hello, None, "subscribed")]
            if position.replay_from is not None:
                stream.last = position.last
                async for frames in stream.replay(
                    position.base, position.replay_from, position.last
                ):
                    yield frames
                position = TailPosition(position.base, {}, stream.last, position.since)
            async for frames in stream.catch_up(position):
                yield frames
        stream.subscription.take_in(None)
        stream.subscription.buffer.go_live(stream.last)
        async for frames in stream.live():
            yield frames


class Stream:
    """The state of one stream while it runs."""

    def __init__(
        self,
        service: TailService,
        subscription: Subscription,
        digest: str,
        starts: Mapping[str, ShardSnapshot],
    ) -> None:
        self.service = service
        self.subscription = subscription
        self.digest = digest
        self.starts = dict(starts)
        self.last: EventKey | None = None
        self.resume_id: str | None = None
        self.kind = subscription.spec.kind
        self.base: dict[str, ShardSnapshot] = {}
        self.claims: dict[str, tuple[Claim, ...]] = {}
        # Loop time at which the stream ends (duration_s), if any.
        self.deadline: float | None = None

    def encode(self, part: Mapping[str, Any], last: EventKey | None) -> str:
        return self.service.codec.encode(part, last, self.digest, clock.time())

    def _overflowed(self, marks: Marks | None) -> bytes:
        """The stream's last frame: the resume cursor (what was sent so far) and why."""
        self.service.metrics.tail_overflows.inc()
        if marks is not None:
            self.resume_id = self.encode(self._part(marks), marks.last)
        return frame(
            {
                "overflow": True,
                "cursor": self.resume_id,
                "message": f"more than {self.service.settings.max_buffered_events} rows "
                "waited for this client (SHARDLOG_TAIL__MAX_BUFFERED_EVENTS): resume with "
                "this cursor (Last-Event-ID or after=)",
            },
            self.resume_id,
            "overflow",
        )

    # --- replay ------------------------------------------------------------------------

    async def replay(
        self, pin: Mapping[str, ShardSnapshot], since: datetime, after: EventKey | None
    ) -> AsyncIterator[list[bytes]]:
        """The matching rows of ``pin``'s snapshots from ``since`` on (after ``after``), in
        order, each with a replay cursor."""
        spec = self.subscription.spec
        horizon = clock.now() + timedelta(days=1)
        query = dataclasses.replace(
            spec.query,
            window=dataclasses.replace(spec.query.window, start=since, end=horizon),
            order="asc",
        )
        everywhere = self.service.hub.catalog.snapshot.shards.keys()
        shards_pin = Pin(dict(pin), frozenset(everywhere - pin.keys()))
        part = self.service.codec.shard_part(TailPosition(pin, {}, None, clock.time(), since))
        cursor = None if after is None else Position(after[0], after[1], after[2], after[3])
        told_partial = False
        while True:
            if self.subscription.overflowed:
                return
            rows, failures = await self.service.search.pinned_page(
                query, spec.grant, shards_pin, cursor, REPLAY_PAGE_ROWS
            )
            if failures and not told_partial:
                told_partial = True
                failed = [{"shard": f.shard, "reason": f.reason} for f in failures]
                yield [frame({"failed_shards": failed}, None, "partial")]
            chunks = []
            for row in rows:
                key: EventKey = (row["ts"], row["shard"], row["owner_id"], row["id"], 0)
                self.last = key
                item = {**self.service.search.item(self.kind, row), "late": False, "replayed": True}
                self.resume_id = self.encode(part, key)
                chunks.append(frame(item, self.resume_id))
            if chunks:
                self.service.metrics.tail_events.labels(self.kind).inc(len(chunks))
                yield chunks
            if len(rows) < REPLAY_PAGE_ROWS:
                return
            last = rows[-1]
            cursor = Position(last["ts"], last["shard"], last["owner_id"], last["id"])

    # --- catch-up ----------------------------------------------------------------------

    async def catch_up(self, position: TailPosition) -> AsyncIterator[list[bytes]]:
        """A resume's rows committed after the cursor's ``base`` and up to where the hub took
        this subscription up, less those the cursor says were sent: shard by shard, each in
        key order (marked late where they sort before a row sent already), in pages of at
        most SHARDLOG_TAIL__MAX_BUFFERED_EVENTS rows. Every row's cursor covers what was sent
        before, so a resume that breaks again loses nothing and repeats nothing. A shard the
        hub has not read yet is waited for, without holding up the others (keep-alives go on);
        one that left the catalog, or is marked down there (no write goes to it), has nothing
        to send."""
        self.base = {**self.starts, **position.base}
        self.claims = {shard: tuple(c) for shard, c in position.claims.items()}
        keys = [key for found in position.claims.values() for _snap, key in found]
        if position.last is not None:
            keys.append(position.last)
        self.last = max(keys, default=None)
        waiting = dict(sorted(position.base.items()))
        while waiting:
            ready = []
            shards = self.service.hub.catalog.snapshot.shards
            for shard in list(waiting):
                known = shards.get(shard)
                if known is None or known.state == "down":
                    del waiting[shard]
                    self.base.pop(shard, None)
                    self.claims.pop(shard, None)
                elif shard in self.subscription.start:
                    ready.append((shard, waiting.pop(shard)))
            for shard, base in ready:
                until = self.subscription.start[shard]
                if until != base:
                    async for chunk in self._catch_up_shard(shard, base, until, position):
                        yield chunk
                self.base[shard] = until
                self.claims.pop(shard, None)
            if waiting and not ready:
                yield [b": waiting for a shard\n\n"]
                await asyncio.sleep(_CATCH_UP_PAUSE_S)

    async def _catch_up_shard(
        self, shard: str, base: ShardSnapshot, until: ShardSnapshot, position: TailPosition
    ) -> AsyncIterator[list[bytes]]:
        page_rows = self.service.settings.max_buffered_events
        tables = await self._retrying(shard, lambda: self._written(shard, base, until))
        if not tables:
            return
        owners = {table.owner_id: mapping for table, _, _, mapping in tables}
        ranges = [(table, first, last) for table, first, last, _ in tables]
        after: Position | None = None
        spec = self.subscription.spec
        key_name = KEY_NAME[spec.kind]
        while True:
            if self.subscription.overflowed:
                return
            text, params = sql.catch_up_sql(
                ranges, shard, base, until, self.subscription.condition, after, page_rows
            )
            records = await self._retrying(
                shard, functools.partial(self._fetch, shard, text, params)
            )
            chunks = []
            since = position.since
            for record in records:
                row = {k: v for k, v in record.items() if k not in ("xid", "merged")}
                mapping = owners[row["owner_id"]]
                key: EventKey = (row["ts"], shard, mapping.id, row["id"], record["xid"])
                if position.sent(shard, record["xid"], key):
                    continue
                row["shard"] = shard
                row[key_name] = mapping.key
                late = self.last is not None and key < self.last
                if self.last is None or key > self.last:
                    self.last = key
                self.claims[shard] = (*position.claims.get(shard, ()), (until, key))
                part = self.service.codec.shard_part(
                    TailPosition(self.base, self.claims, None, since)
                )
                self.resume_id = self.encode(part, self.last)
                item = self.service.search.item(self.kind, row)
                item["late"] = late
                if self.kind == "flow":
                    item["merged"] = record["merged"]
                chunks.append(frame(item, self.resume_id))
            if chunks:
                self.service.metrics.tail_events.labels(self.kind).inc(len(chunks))
                yield chunks
            if len(records) < page_rows:
                return
            last = records[-1]
            after = Position(last["ts"], shard, last["owner_id"], last["id"])

    async def _written(
        self, shard: str, base: ShardSnapshot, until: ShardSnapshot
    ) -> list[tuple[DayTable, datetime, datetime, OwnerMapping]]:
        """The day tables of owners this stream covers that transactions after ``base`` (and
        seen by ``until``) wrote, with the time range they wrote."""
        hub = self.service.hub
        text, params = sql.log_sql(base, until)
        reader = hub.pools.reader(shard, primary=True)
        lines = await reader.fetch(text, *params)
        ranges = await with_own_tables(reader, written_ranges(lines, self.subscription.spec.kind))
        mappings = await hub.mappings(self.subscription.spec.kind, {t.owner_id for t in ranges})
        out = []
        for table, (first, last) in sorted(ranges.items()):
            mapping = mappings.get(table.owner_id)
            if mapping is not None and self.subscription.spec.covers(mapping):
                out.append((table, first, last, mapping))
        return out

    async def _fetch(self, shard: str, text: str, params: list[Any]) -> list[Any]:
        return list(await self.service.hub.pools.reader(shard, primary=True).fetch(text, *params))

    async def _retrying(self, shard: str, attempt: Callable[[], Awaitable[T]]) -> T:
        while True:
            try:
                return await attempt()
            except (*DRIVER_ERRORS, Unavailable) as exc:
                log.warning("tail: catching up on %s failed: %s", shard, describe(exc))
                await asyncio.sleep(_CATCH_UP_PAUSE_S)

    # --- live --------------------------------------------------------------------------

    def _part(self, marks: Marks, base: dict[str, list[int]] | None = None) -> dict[str, Any]:
        since = marks.oldest_read_at if marks.oldest_read_at is not None else clock.time()
        position = TailPosition(marks.base, marks.claims, None, since)
        return self.service.codec.shard_part(position, base)

    def _frames(self, released: list[tuple[Event, Marks]]) -> list[bytes]:
        metrics = self.service.metrics
        # The lag is measured against the database's commit time: the wall clock's.
        wall = time.time()
        chunks = []
        # The events of one release share their marks' base (encoded once).
        base_of: Mapping[str, ShardSnapshot] | None = None
        base: dict[str, list[int]] | None = None
        for event, marks in released:
            if marks.base is not base_of:
                base_of, base = marks.base, self.service.codec.base_part(marks.base)
            rendered = event.rendered
            if rendered:
                item = rendered[0]
            else:
                item = orjson.dumps(self.service.search.item(self.kind, event.row))
                if rendered is not None:
                    rendered.append(item)
            flags = b',"late":true' if event.late else b',"late":false'
            if self.kind == "flow":
                flags += b',"merged":true' if event.merged else b',"merged":false'
            self.resume_id = self.encode(self._part(marks, base), marks.last)
            chunks.append(raw_frame(item[:-1] + flags + b"}", self.resume_id))
            metrics.tail_lag.observe(max(0.0, wall - event.committed_at))
        metrics.tail_events.labels(self.kind).inc(len(chunks))
        return chunks

    def _turn(self) -> tuple[list[bytes], bool]:
        """One turn's frames (TURN_ROWS at a time, for about TURN_S), and whether more
        work waits."""
        subscription = self.subscription
        buffer = subscription.buffer
        started = time.perf_counter()
        frames: list[bytes] = []
        while True:
            now = clock.time()
            due = buffer.next_due()
            if due is None or due > now:
                subscription.take_in(TURN_ROWS)
            seen = subscription.seen_before_inbox(self.service.hub.seen())
            released = buffer.release(now, seen, TURN_ROWS)
            if released:
                frames.extend(self._frames(released))
            more = bool(subscription.inbox) or len(released) >= TURN_ROWS
            if not more or time.perf_counter() - started >= TURN_S:
                return frames, more

    async def live(self) -> AsyncIterator[list[bytes]]:
        """Live rows, a turn's worth at a time (router/tail/pacing.py): at most TURN_ROWS due
        rows leave the buffer; when none is due, the inbox's next rows move into it. A stream
        behind keeps its backlog in the inbox, as the hub's shared lists, not as rows of its
        own."""
        settings = self.service.settings
        subscription = self.subscription
        buffer = subscription.buffer
        turn = subscription.turn
        loop = asyncio.get_running_loop()
        heartbeat_at = loop.time() + settings.heartbeat_s
        while True:
            wake_at = heartbeat_at
            due = buffer.next_due()
            if due is not None:
                wake_at = min(wake_at, loop.time() + max(0.0, due - clock.time()))
            if self.deadline is not None:
                wake_at = min(wake_at, self.deadline)
            await turn.wait(wake_at)
            ended = subscription.overflowed
            try:
                if ended:
                    frames = [self._overflowed(subscription.overflow)]
                else:
                    frames, more = self._turn()
                    if more:
                        turn.want()
            finally:
                turn.done()
            if ended:
                yield frames
                return
            if frames:
                yield frames
            if self.deadline is not None and loop.time() >= self.deadline:
                return
            if loop.time() >= heartbeat_at:
                heartbeat_at = loop.time() + settings.heartbeat_s
                yield [b": keep-alive\n\n"]
