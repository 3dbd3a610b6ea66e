"""Data sets that arrived before their template, held until it comes or they grow stale.

Exporters send templates periodically, so after a collector restart (or a lost template
datagram) data sets precede their template for a while. Each exporter may hold a bounded number
of octets, and all exporters together another (a flood from spoofed source addresses must not
grow memory); beyond either the oldest held sets go, those of the exporter holding the most
first for the overall bound, counted as dropped like the stale ones."""

from __future__ import annotations

from collections import deque
from typing import NamedTuple


class HeldSet(NamedTuple):
    domain: int
    template_id: int
    version: int
    body: bytes
    export_ms: int
    # The v9 header's sysUptime, which its relative times need; None for IPFIX.
    uptime_ms: int | None
    held_at: float


class HeldSets:
    def __init__(
        self, hold_s: float, max_bytes_per_exporter: int, max_bytes: int = 64 << 20
    ) -> None:
        self.hold_s = hold_s
        self.max_bytes_per_exporter = max_bytes_per_exporter
        self.max_bytes = max_bytes
        self.total_bytes = 0
        self._sets: dict[str, deque[HeldSet]] = {}
        self._bytes: dict[str, int] = {}
        self._dropped: dict[str, int] = {}

    def held(self, exporter: str) -> int:
        return len(self._sets.get(exporter, ()))

    def hold(self, exporter: str, held: HeldSet) -> None:
        sets = self._sets.setdefault(exporter, deque())
        sets.append(held)
        self._bytes[exporter] = self._bytes.get(exporter, 0) + len(held.body)
        self.total_bytes += len(held.body)
        while exporter in self._sets and self._bytes[exporter] > self.max_bytes_per_exporter:
            self._drop_oldest(exporter)
        while self.total_bytes > self.max_bytes and self._bytes:
            self._drop_oldest(max(self._bytes, key=self._bytes.__getitem__))

    def release(self, exporter: str, domain: int, template_id: int) -> list[HeldSet]:
        """The sets held for a template that has now arrived, oldest first."""
        sets = self._sets.get(exporter)
        if not sets:
            return []
        released: list[HeldSet] = []
        kept: list[HeldSet] = []
        for held in sets:
            mine = held.domain == domain and held.template_id == template_id
            (released if mine else kept).append(held)
        if released:
            self._replace(exporter, kept)
        return released

    def expire(self, now: float) -> dict[str, int]:
        """Drops the sets held longer than hold_s; per exporter, how many sets were dropped
        since the last call (stale or pushed out by the bound)."""
        for exporter, sets in list(self._sets.items()):
            while sets and now - sets[0].held_at > self.hold_s:
                self._drop_oldest(exporter)
        dropped, self._dropped = self._dropped, {}
        return dropped

    def _drop_oldest(self, exporter: str) -> None:
        sets = self._sets[exporter]
        gone = sets.popleft()
        self._bytes[exporter] -= len(gone.body)
        self.total_bytes -= len(gone.body)
        self._dropped[exporter] = self._dropped.get(exporter, 0) + 1
        if not sets:
            self._replace(exporter, [])

    def _replace(self, exporter: str, kept: list[HeldSet]) -> None:
        self.total_bytes -= self._bytes.get(exporter, 0)
        if kept:
            self._sets[exporter] = deque(kept)
            self._bytes[exporter] = sum(len(s.body) for s in kept)
            self.total_bytes += self._bytes[exporter]
        else:
            self._sets.pop(exporter, None)
            self._bytes.pop(exporter, None)
