"""A mapping of at most ``capacity`` entries: past it, the least recently used one goes. What
keeps a router cache of owners or tables bounded however many it meets (docs/architecture.md,
"The catalog and the router's memory"); a miss costs the caller the round trip the entry saved.

Reading an entry (``get``) or writing it (``put``) makes it the most recent; ``in`` and
``len`` do not change the order."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"an LRU holds at least one entry, not {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: K) -> V | None:
        """The entry's value (now the most recent), or None when it is not held."""
        if key not in self._entries:
            return None
        self._entries.move_to_end(key)
        return self._entries[key]

    def put(self, key: K, value: V) -> None:
        """Holds ``value`` under ``key`` as the most recent entry; the least recent one goes
        when that makes one too many."""
        self._entries[key] = value
        self._entries.move_to_end(key)
        if len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def pop(self, key: K) -> V | None:
        """Forgets ``key``; its value, or None when it was not held."""
        return self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()

    def keys(self) -> list[K]:
        """The keys held, least recent first."""
        return list(self._entries)
