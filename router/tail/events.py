"""What a subscription receives: events (one committed row, or a merge into a flow row) and
the batches they came in. Pure: no I/O.

An event's key orders every row of every shard: (ts, shard, owner id, id) as a search orders
them, then the transaction that wrote it, so that a merge into a row already delivered is an
event of its own."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from router.search.snapshot import ShardSnapshot

EventKey = tuple[datetime, str, int, int, int]


@dataclass(eq=False)
class Batch:
    """The events of one shard that one read found: rows whose transaction committed after
    ``start`` (and up to the snapshot of the read). ``pending``: how many of its events the
    subscription has not sent yet."""

    shard: str
    start: ShardSnapshot
    read_at: float
    # The snapshot of the read (None: not known, a resume's catch-up).
    end: ShardSnapshot | None = None
    pending: int = 0
    late_pending: int = 0
    # The largest key of the batch's late events sent so far (they leave in key order).
    late_sent: EventKey | None = None
    seq: int = 0


@dataclass(eq=False, slots=True)
class Event:
    key: EventKey
    row: dict[str, Any]
    merged: bool
    # When the row's transaction began on its shard (the tail log's line), for the lag metric.
    committed_at: float = 0.0
    due_at: float = 0.0
    late: bool = False
    batch: Batch | None = field(default=None, repr=False)
    # The row's item as JSON once the first subscription rendered it, shared by the events
    # of every subscription (without the per-event flags).
    rendered: list[bytes] | None = field(default=None, repr=False)

    def copy(self) -> Event:
        return Event(self.key, self.row, self.merged, self.committed_at, rendered=self.rendered)

    @property
    def shard(self) -> str:
        return self.key[1]

    def __lt__(self, other: Event) -> bool:
        return self.key < other.key
