"""One subscription's waiting room: events wait for the watermark, leave in key order, and
every event leaves with the position a resume continues from. Pure: no I/O, no clock of its
own (callers pass ``now``, seconds since the epoch).

Rules (docs/api.md "Live tail"):
- An event is due ``watermark`` seconds after its ts, or after it was read when its ts lies
  ahead of that. Due events leave in key order, together with every event that sorts before
  them, so what has left is always a prefix of the key order up to the last key sent (K)...
- ...except late events: one whose key sorts at or before K when it arrives (its ts is older
  than the watermark, or it waited for a shard that was slow to answer) leaves at the next
  release, marked late, before the others.

The position (router/tail/position.py) says which events have been sent, per shard: every one
committed up to ``base``, and those committed after ``base`` up to ``seen`` whose key is at most
the shard's last key sent. ``base`` is the start of the oldest batch with events still waiting;
``seen`` the start of the oldest batch with a late event still waiting (a late event may sort
before that key: the claim must leave it out), or else what the hub has read. Per shard, as
the events of one shard leave in their key order even where late ones interleave.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from router.search.snapshot import ShardSnapshot
from router.tail.events import Batch, Event, EventKey

Claim = tuple[ShardSnapshot, EventKey]


@dataclass(frozen=True)
class Marks:
    """Per shard: everything committed up to ``base`` was sent; after it, each row that a
    claim covers (its transaction seen by the claim's snapshot, its key at most the claim's
    key)."""

    base: Mapping[str, ShardSnapshot]
    claims: Mapping[str, tuple[Claim, ...]]
    last: EventKey | None
    oldest_read_at: float | None


class Overflow(Exception):
    """More events than the subscriber may have waiting: the buffer is emptied and the
    subscription ends with ``marks``, from which a resume reads the dropped events again."""

    def __init__(self, marks: Marks) -> None:
        super().__init__("too many events waiting")
        self.marks = marks


class Buffer:
    def __init__(self, watermark_s: float, capacity: int, last: EventKey | None = None) -> None:
        self.watermark_s = watermark_s
        self.capacity = capacity
        self.last = last
        self.live = True
        self._heap: list[Event] = []
        self._late: deque[Event] = deque()
        self._ahead: list[tuple[float, EventKey]] = []
        self._batches: dict[str, deque[Batch]] = {}
        self._shard_last: dict[str, EventKey] = {}
        self._added = 0

    def __len__(self) -> int:
        return len(self._heap) + len(self._late)

    # --- in ----------------------------------------------------------------------------

    def add(
        self,
        batch: Batch,
        events: Iterable[Event],
        seen: Mapping[str, ShardSnapshot],
        *,
        earliest: bool = False,
    ) -> None:
        """The events of one read of ``batch.shard``, any order. ``seen``: what the hub had
        read before this batch. ``earliest``: the batch starts before every other of its shard
        (a resume's catch-up, added after the hub's first batches). Raises Overflow (the
        buffer is then empty)."""
        events = list(events)
        if not events:
            return
        if len(self) + len(events) > self.capacity:
            marks = self._marks({**seen, batch.shard: batch.start}, extra=batch)
            self.clear()
            raise Overflow(marks)
        waiting = self._batches.setdefault(batch.shard, deque())
        self._added += 1
        batch.seq = -self._added if earliest else self._added
        if earliest:
            waiting.appendleft(batch)
        else:
            waiting.append(batch)
        late = []
        for event in events:
            event.batch = batch
            batch.pending += 1
            if batch.read_at < event.key[0].timestamp():
                event.due_at = batch.read_at + self.watermark_s
                heapq.heappush(self._ahead, (event.due_at, event.key))
            else:
                event.due_at = event.key[0].timestamp() + self.watermark_s
            if self.live and self.last is not None and event.key <= self.last:
                late.append(event)
            else:
                heapq.heappush(self._heap, event)
        self._add_late(late)

    def _add_late(self, events: list[Event]) -> None:
        """Late events leave batch by batch (in the order the batches came), each batch's in
        key order: what a partly sent batch has sent is then its events up to a key."""
        for event in sorted(events, key=lambda e: (e.batch.seq if e.batch else 0, e.key)):
            event.late = True
            assert event.batch is not None
            event.batch.late_pending += 1
            self._late.append(event)

    def go_live(self, last: EventKey | None) -> None:
        """After a replay that sent everything up to ``last``: what came in meanwhile and sorts
        before it is late."""
        self.live = True
        if last is not None and (self.last is None or last > self.last):
            self.last = last
        if self.last is None:
            return
        late = []
        while self._heap and self._heap[0].key <= self.last:
            late.append(heapq.heappop(self._heap))
        self._add_late(late)

    def clear(self) -> None:
        self._heap.clear()
        self._late.clear()
        self._ahead.clear()
        self._batches.clear()

    # --- out ---------------------------------------------------------------------------

    def next_due(self) -> float | None:
        """When the next event is due (now, for late ones); None when nothing waits."""
        if not self.live:
            return None
        if self._late:
            return 0.0
        times = [self._heap[0].due_at] if self._heap else []
        if self._ahead:
            times.append(self._ahead[0][0])
        return min(times) if times else None

    def release(
        self, now: float, seen: Mapping[str, ShardSnapshot], most: int | None = None
    ) -> list[tuple[Event, Marks]]:
        """The events that leave now (the first ``most`` of them; the rest at the next
        release), each with the marks a client holds once it has it. ``seen``: what the hub
        has read of every shard."""
        if not self.live:
            return []
        out: list[tuple[Event, Marks]] = []
        room = len(self) if most is None else most
        base = self._base(seen)
        while self._late and len(out) < room:
            event = self._late.popleft()
            self._sent(event)
            out.append((event, self._marks_with(base, seen)))
        limit: EventKey | None = None
        while self._ahead and self._ahead[0][0] <= now:
            key = heapq.heappop(self._ahead)[1]
            limit = key if limit is None or key > limit else limit
        while (
            self._heap
            and len(out) < room
            and (self._heap[0].due_at <= now or (limit is not None and self._heap[0].key <= limit))
        ):
            event = heapq.heappop(self._heap)
            self.last = event.key
            self._sent(event)
            out.append((event, self._marks_with(base, seen)))
        if limit is not None and self._heap and self._heap[0].key <= limit:
            # Cut short: the events up to ``limit`` are due at the next release.
            heapq.heappush(self._ahead, (now, limit))
        return out

    def marks(self, seen: Mapping[str, ShardSnapshot]) -> Marks:
        return self._marks(seen)

    # --- positions ---------------------------------------------------------------------

    def _sent(self, event: Event) -> None:
        shard_last = self._shard_last.get(event.shard)
        if shard_last is None or event.key > shard_last:
            self._shard_last[event.shard] = event.key
        batch = event.batch
        assert batch is not None
        batch.pending -= 1
        if event.late:
            batch.late_pending -= 1
            batch.late_sent = event.key
        waiting = self._batches.get(batch.shard)
        while waiting and waiting[0].pending == 0:
            waiting.popleft()

    def _base(self, seen: Mapping[str, ShardSnapshot]) -> dict[str, ShardSnapshot]:
        base = dict(seen)
        for shard, waiting in self._batches.items():
            if waiting:
                base[shard] = waiting[0].start
        return base

    def _marks_with(
        self, base: dict[str, ShardSnapshot], seen: Mapping[str, ShardSnapshot]
    ) -> Marks:
        """``base`` as it was before this release began: a batch emptied by a later event of
        the same release is not sent yet for an earlier one."""
        claims: dict[str, tuple[Claim, ...]] = {
            shard: ((seen[shard], key),) for shard, key in self._shard_last.items() if shard in seen
        }
        for shard, waiting in self._batches.items():
            partly = next((b for b in waiting if b.late_pending), None)
            key = self._shard_last.get(shard)
            if partly is None or key is None:
                continue
            # Nothing of the oldest batch with late events waiting counts as sent by the
            # shard's key, but its late events sent so far do (by their own key).
            found: tuple[Claim, ...] = ((partly.start, key),)
            if partly.late_sent is not None and partly.end is not None:
                found += ((partly.end, partly.late_sent),)
            claims[shard] = found
        oldest = min((w[0].read_at for w in self._batches.values() if w), default=None)
        return Marks(base, claims, self.last, oldest)

    def _marks(self, seen: Mapping[str, ShardSnapshot], extra: Batch | None = None) -> Marks:
        base = self._base(seen)
        marks = self._marks_with(base, seen)
        if extra is None:
            return marks
        if not self._batches.get(extra.shard):
            base[extra.shard] = extra.start
        oldest = min(x for x in (marks.oldest_read_at, extra.read_at) if x is not None)
        return Marks(base, marks.claims, marks.last, oldest)
