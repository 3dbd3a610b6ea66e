"""PURE: how long a request body may take to arrive.

Each piece must come within ``idle_s`` of the one before, and the whole body at an average of
at least ``min_rate`` bytes/s after a head start of ``idle_s`` (Apache's mod_reqtimeout
``MinRate``): an idle timeout alone never stops a client that sends one byte every second."""

from __future__ import annotations

from dataclasses import dataclass, field

# Timers may fire a little before their time; a deadline this close counts as reached.
EARLY_S = 0.005


@dataclass
class BodyPace:
    idle_s: float
    min_rate: int  # bytes/s; 0: no pace, only the idle timeout
    started: float
    received: int = 0
    last: float = field(init=False)

    def __post_init__(self) -> None:
        self.last = self.started

    def arrived(self, now: float, size: int) -> None:
        self.received += size
        self.last = now

    def excuse(self, now: float) -> None:
        """The router, not the client, held the body up (reading paused, or the client waits
        for ``100 Continue``): start again as if the client were exactly on pace."""
        self.last = now
        self.started = now - (self.received / self.min_rate if self.min_rate else 0.0)

    def deadline(self) -> float:
        idle = self.last + self.idle_s
        if not self.min_rate:
            return idle
        return min(idle, self.started + self.idle_s + self.received / self.min_rate)

    def expired(self, now: float) -> bool:
        return now >= self.deadline() - EARLY_S
