"""Room over the connection cap for health checks: a flood of idle connections that fills the
cap must not make an orchestrator's liveness probe fail and kill a healthy router.

A connection that finds the cap reached takes a place in the room, if there is one, and is read
up to its request headers: a health check is answered (and the connection closed after it),
anything else gets the cap's 503. A newcomer that finds the room full takes the place of its
oldest member that has sent nothing yet or was already answered 503; a probe sends its request
as soon as it connects, so a flood of silent connections cannot keep it out."""

from __future__ import annotations

from typing import Protocol

HEALTH_METHODS = frozenset({b"GET", b"HEAD"})
HEALTH_PATHS = frozenset({b"/health/live", b"/health/ready"})


def is_health_check(method: bytes, url: bytes) -> bool:
    return method in HEALTH_METHODS and url.split(b"?", 1)[0] in HEALTH_PATHS


class Member(Protocol):
    def replaceable(self) -> bool:
        """Nothing of a request has come yet, or the connection was refused and lingers."""

    def evict(self) -> None:
        """Close the connection: a newcomer takes its place."""


class HealthRoom:
    """The connections over the cap, at most ``size``. One per process."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._members: dict[Member, None] = {}  # oldest first

    def __len__(self) -> int:
        return len(self._members)

    def admit(self, member: Member) -> bool:
        if self.size <= 0:
            return False
        if len(self._members) >= self.size:
            oldest = next((m for m in self._members if m.replaceable()), None)
            if oldest is None:
                return False
            del self._members[oldest]
            oldest.evict()
        self._members[member] = None
        return True

    def leave(self, member: Member) -> None:
        self._members.pop(member, None)
