"""One open tail stream as the hub sees it: what it covers, its filter, its inbox and buffer."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from router.auth.scopes import Grant, key_denial
from router.catalog.snapshot import OwnerMapping
from router.db.names import Kind
from router.search.query import AuditQuery, FlowQuery, Keys, Window
from router.search.snapshot import ShardSnapshot
from router.tail.events import Batch, Event
from router.tail.ordering import Buffer, Marks, Overflow
from router.tail.pacing import Turn

# The window of a filter is no part of it (a tail has none; its replay's is the search's).
_NO_WINDOW = Window(datetime(2000, 1, 1, tzinfo=UTC), datetime(2000, 1, 2, tzinfo=UTC))
Filter = AuditQuery | FlowQuery


@dataclass(frozen=True)
class TailSpec:
    """What a stream covers: the owners (audit) or switches (flows) of ``keys`` that the
    grant reaches, whenever they first write; rows that match ``query``'s filters."""

    kind: Kind
    query: Filter
    keys: Keys
    grant: Grant

    def covers(self, mapping: OwnerMapping) -> bool:
        if key_denial(self.grant, self.kind, mapping.key, mapping.tenant) is not None:
            return False
        if mapping.key in self.keys.listed:
            return True
        if self.keys.prefix is not None:
            return mapping.key.startswith(self.keys.prefix)
        return not self.keys.listed

    def condition(self) -> Filter | None:
        """The filter alone, equal for equal filters (the hub evaluates each once per row);
        None when every row matches."""
        if isinstance(self.query, AuditQuery):
            if not self.query.patterns:
                return None
            return dataclasses.replace(self.query, owners=Keys(), window=_NO_WINDOW, order="asc")
        stripped = dataclasses.replace(self.query, switches=Keys(), window=_NO_WINDOW, order="asc")
        everything = dataclasses.replace(
            stripped,
            src_ip=None,
            dst_ip=None,
            src_port=None,
            dst_port=None,
            ip_version=None,
            proto=None,
            either_direction=False,
        )
        return None if stripped == everything else stripped


class Subscription:
    """A stream's subscription: rows the hub handed it wait in ``inbox`` (shared, uncopied:
    handing them over costs the hub the same for any number of rows) until the stream's turn
    moves them into its buffer (router/tail/pacing.py)."""

    def __init__(self, spec: TailSpec, buffer: Buffer, turn: Turn) -> None:
        self.spec = spec
        self.buffer = buffer
        self.turn = turn
        self.inbox: deque[tuple[Batch, list[list[Event]], Mapping[str, ShardSnapshot]]] = deque()
        self.inbox_rows = 0
        # The marks a resume continues from once the buffer overflowed (None with
        # ``overflowed`` when it did before the stream was live: its last cursor says).
        self.overflow: Marks | None = None
        self.overflowed = False
        self.condition = spec.condition()
        # Per shard, the snapshot after which every row reaches this subscription.
        self.start: dict[str, ShardSnapshot] = {}
        self.all_started = asyncio.Event()
        self._expected: set[str] = set()

    def expect(self, shards: Iterable[str]) -> None:
        self._expected = set(shards)
        if not self._expected:
            self.all_started.set()

    def started(self, shard: str, snapshot: ShardSnapshot) -> None:
        self.start.setdefault(shard, snapshot)
        if self._expected <= self.start.keys():
            self.all_started.set()

    def deliver(
        self, batch: Batch, parts: list[list[Event]], seen: Mapping[str, ShardSnapshot]
    ) -> bool:
        """Takes one read's events (``parts``: lists shared with other subscriptions, to be
        copied in the stream's turn). False when the subscriber would have too much waiting:
        the stream ends (overflow)."""
        if self.overflowed:
            return False
        rows = sum(map(len, parts))
        if not rows:
            return True
        if len(self.buffer) + self.inbox_rows + rows <= self.buffer.capacity:
            self.inbox.append((batch, parts, seen))
            self.inbox_rows += rows
            self.turn.want()
            return True
        # The marks of an overflow come from the buffer: everything waiting goes there first.
        self.take_in(None)
        try:
            self.buffer.add(batch, _copies(parts), seen)
        except Overflow as exc:
            # Before the stream is live nothing has left the buffer: the stream's own last
            # cursor says what was sent.
            self.overflow = exc.marks if self.buffer.live else None
            self.overflowed = True
            self.turn.want()
            return False
        return True  # pragma: no cover - the count above says it overflows

    def take_in(self, most_rows: int | None) -> bool:
        """Moves the inbox's batches into the buffer, whole batches up to about
        ``most_rows`` rows (None: all). True when some wait still."""
        moved = 0
        while self.inbox and (most_rows is None or moved < most_rows):
            batch, parts, seen = self.inbox.popleft()
            rows = sum(map(len, parts))
            self.inbox_rows -= rows
            moved += rows
            self.buffer.add(batch, _copies(parts), seen)
        return bool(self.inbox)

    def seen_before_inbox(self, seen: Mapping[str, ShardSnapshot]) -> Mapping[str, ShardSnapshot]:
        """What the hub had read when the inbox's oldest rows came (else ``seen``, the hub's
        now): the marks of rows released meanwhile must not claim the inbox's as sent."""
        return self.inbox[0][2] if self.inbox else seen


def _copies(parts: list[list[Event]]) -> Iterator[Event]:
    return (event.copy() for part in parts for event in part)
