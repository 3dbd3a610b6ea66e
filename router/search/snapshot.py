"""What a consistent search (``consistent=true``) pins: for every shard its first page read, the
PostgreSQL snapshot it was read in. Pure: no I/O.

Why a snapshot and not the highest id: ids come from one identity per day table with
``CACHE 1000``, so each writing session takes ids from a block of its own, and a transaction
still open holds ids it has not committed. A later commit may therefore carry a lower id than
the highest one seen. A snapshot says exactly which transactions had committed; every row
records the transaction that inserted it (``created_xid``, router/db/ddl.py), and a later page
keeps the rows whose transaction the snapshot sees. A merge into a flow row keeps that column,
so a flow belongs to the pinned result when its row was first inserted before the snapshot.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from router.routing.search_plan import SearchPlan

NOT_PINNED = "did not answer the first page of this consistent search, so none of its rows are"


@dataclass(frozen=True)
class ShardSnapshot:
    """PostgreSQL's pg_snapshot: transactions below ``xmin`` have ended, those from ``xmax``
    on had not begun, and ``in_progress`` lists those between that were still running."""

    xmin: int
    xmax: int
    in_progress: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not 0 < self.xmin <= self.xmax or any(
            not self.xmin <= xid < self.xmax for xid in self.in_progress
        ):
            raise ValueError(f"not a snapshot: {self.text()}")

    @classmethod
    def parse(cls, text: str) -> ShardSnapshot:
        """From PostgreSQL's text form, ``xmin:xmax:xip,xip``."""
        low, high, running = text.split(":")
        return cls(int(low), int(high), tuple(int(x) for x in running.split(",") if x))

    def sees(self, xid: int) -> bool:
        """Whether a transaction had committed (or ended) in this snapshot: PostgreSQL's
        pg_visible_in_snapshot for a transaction that committed."""
        return xid < self.xmin or (xid < self.xmax and xid not in self.in_progress)

    def text(self) -> str:
        return f"{self.xmin}:{self.xmax}:{','.join(str(x) for x in self.in_progress)}"

    def compact(self) -> list[int]:
        """As small integers for a cursor: ``xmin``, then ``xmax`` and each running
        transaction as its distance from ``xmin``. Computed once (a tail cursor carries the
        same snapshots event after event); not to be changed by the caller."""
        return self._compact

    @functools.cached_property
    def _compact(self) -> list[int]:
        return [self.xmin, self.xmax - self.xmin, *(x - self.xmin for x in self.in_progress)]

    @classmethod
    def from_compact(cls, values: list[Any]) -> ShardSnapshot:
        if len(values) < 2 or not all(isinstance(v, int) and v >= 0 for v in values):
            raise ValueError("not a compact snapshot")
        xmin = values[0]
        return cls(xmin, xmin + values[1], tuple(xmin + v for v in values[2:]))


@dataclass(frozen=True)
class Pin:
    """The snapshots of a consistent search's shards, and the shards that held tables of its
    range but did not answer its first page (their rows are not part of it)."""

    snapshots: Mapping[str, ShardSnapshot]
    missing: frozenset[str] = field(default_factory=frozenset)

    def as_json(self) -> dict[str, Any]:
        return {
            "s": {shard: snap.compact() for shard, snap in sorted(self.snapshots.items())},
            "m": sorted(self.missing),
        }

    @classmethod
    def from_json(cls, value: Any) -> Pin:
        if not isinstance(value, dict) or not isinstance(value.get("s"), dict):
            raise ValueError("not a pin")
        snapshots = {str(s): ShardSnapshot.from_compact(v) for s, v in value["s"].items()}
        return cls(snapshots, frozenset(str(s) for s in value.get("m", [])))


def pinned_plan(plan: SearchPlan, pin: Pin) -> tuple[SearchPlan, list[str]]:
    """The part of today's plan the pinned result comes from, and the shards of it that did
    not answer the first page (they count as failed). A shard that held no table of the range
    at the first page is left out: everything it holds now came later."""
    known = pin.snapshots.keys() | pin.missing
    targets = tuple(t for t in plan.targets if t.shard in pin.snapshots)
    unavailable = tuple(s for s in plan.unavailable if s in known)
    not_pinned = [t.shard for t in plan.targets if t.shard in pin.missing]
    return SearchPlan(targets, unavailable), not_pinned
