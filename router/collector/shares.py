"""How many entries each holder has in a shared pool, and a holder with the most, found in
constant time: holders are grouped by their count, and the largest count is kept as counts
change. What the template cache evicts from when unmapped exporters together pass their
bound: the exporter holding the most gives up its oldest entry first."""

from __future__ import annotations


class Shares:
    def __init__(self) -> None:
        self.total = 0
        self._counts: dict[str, int] = {}
        # Holders by count, each group in the order its holders reached that count.
        self._groups: dict[int, dict[str, None]] = {}
        self._top = 0

    def __contains__(self, holder: str) -> bool:
        return holder in self._counts

    def count(self, holder: str) -> int:
        return self._counts.get(holder, 0)

    def join(self, holder: str, count: int) -> None:
        """Counts ``holder`` in the pool, with ``count`` entries."""
        self._set(holder, count)
        self._counts[holder] = count

    def leave(self, holder: str) -> None:
        if holder in self._counts:
            self._set(holder, 0)
            del self._counts[holder]

    def change(self, holder: str, delta: int) -> None:
        """A member's count moved by ``delta`` (no-op for holders not in the pool)."""
        if holder in self._counts:
            count = self._counts[holder] + delta
            self._set(holder, count)
            self._counts[holder] = count

    def largest(self) -> str | None:
        """A holder with the most entries (of those, the first to reach that many)."""
        group = self._groups.get(self._top)
        return next(iter(group)) if group else None

    def _set(self, holder: str, count: int) -> None:
        old = self._counts.get(holder, 0)
        if old:
            group = self._groups[old]
            del group[holder]
            if not group:
                del self._groups[old]
        if count:
            self._groups.setdefault(count, {})[holder] = None
        self.total += count - old
        self._top = max(self._top, count)
        while self._top and self._top not in self._groups:
            self._top -= 1
