"""How many rows of each recent owner-day this router placed on each shard: what balanced
audit placement (placement.deal_least) and the spread width's widening rule read.

Counted when parts are dealt, before they are written (a part that then fails still counts:
the count is a placement hint, never a statement of what the shards hold). Kept in memory only:
a restarted router starts from zero and evens out what it places from then on, and several
routers each balance their own share. Bounded: owner-days before yesterday are dropped, and
past MAX_OWNER_DAYS entries everything is dropped (placement stays correct, only less even)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, timedelta

MAX_OWNER_DAYS = 200_000
_EMPTY: Mapping[str, int] = {}


class OwnerDayCounts:
    def __init__(self, max_entries: int = MAX_OWNER_DAYS) -> None:
        self._max_entries = max_entries
        self._counts: dict[tuple[int, date], dict[str, int]] = {}
        self._today: date | None = None

    def held(self, owner_id: int, day: date) -> Mapping[str, int]:
        """Rows of the owner-day placed on each shard so far (a read-only view)."""
        return self._counts.get((owner_id, day), _EMPTY)

    def rows(self, owner_id: int, day: date) -> int:
        return sum(self.held(owner_id, day).values())

    def add(self, owner_id: int, day: date, shard: str, rows: int) -> None:
        counts = self._counts.get((owner_id, day))
        if counts is None:
            if len(self._counts) >= self._max_entries:
                self._counts.clear()
            counts = self._counts[(owner_id, day)] = {}
        counts[shard] = counts.get(shard, 0) + rows

    def roll(self, today: date) -> None:
        """Drop owner-days before yesterday (a no-op until the day changes)."""
        if today == self._today:
            return
        self._today = today
        oldest = today - timedelta(days=1)
        for key in [key for key in self._counts if key[1] < oldest]:
            del self._counts[key]

    def __len__(self) -> int:
        return len(self._counts)
