"""The room for health checks over the connection cap: who is let in, who gives way."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from router.http.health_room import HealthRoom, is_health_check


@dataclass(eq=False)
class Connection:
    quiet: bool = True
    evicted: bool = False

    def replaceable(self) -> bool:
        return self.quiet

    def evict(self) -> None:
        self.evicted = True


@pytest.mark.parametrize(
    ("method", "url", "health"),
    [
        (b"GET", b"/health/live", True),
        (b"HEAD", b"/health/ready", True),
        (b"GET", b"/health/ready?verbose=1", True),
        (b"POST", b"/health/live", False),
        (b"GET", b"/health/live/x", False),
        (b"GET", b"/health", False),
        (b"GET", b"/v1/audit/search", False),
    ],
)
def test_what_counts_as_a_health_check(method: bytes, url: bytes, health: bool) -> None:
    assert is_health_check(method, url) is health


def test_a_newcomer_takes_the_place_of_the_oldest_replaceable_member() -> None:
    room = HealthRoom(2)
    busy, quiet, newcomer = Connection(quiet=False), Connection(), Connection()
    assert room.admit(busy) and room.admit(quiet)
    assert room.admit(newcomer)
    assert quiet.evicted and not busy.evicted and len(room) == 2
    newcomer.quiet = False
    assert not room.admit(Connection())  # nobody to give way: refused
    room.leave(busy)
    assert room.admit(Connection()) and len(room) == 2


def test_an_empty_room_admits_nobody() -> None:
    assert not HealthRoom(0).admit(Connection())
