"""The pace a request body must keep: idle gaps and the average rate."""

from __future__ import annotations

import pytest

from router.http.pace import EARLY_S, BodyPace


def test_idle_only_when_no_rate() -> None:
    pace = BodyPace(idle_s=30, min_rate=0, started=100)
    assert pace.deadline() == 130
    pace.arrived(125, 1)
    assert pace.deadline() == 155
    assert not pace.expired(154)
    assert pace.expired(155)


def test_a_byte_per_second_is_cut_by_the_rate_not_the_idle_timeout() -> None:
    pace = BodyPace(idle_s=30, min_rate=500, started=0)
    now = 0.0
    while not pace.expired(now):
        now += 1
        pace.arrived(now, 1)
        assert now < 60, "never cut off"
    # Head start 30 s, plus 1/500 s per byte received.
    assert now == pytest.approx(31, abs=1)


def test_a_fast_body_may_take_long_when_it_keeps_the_rate() -> None:
    pace = BodyPace(idle_s=30, min_rate=500, started=0)
    for second in range(1, 600):
        pace.arrived(second, 1000)  # 1 kB/s, twice the minimum
        assert not pace.expired(second + 0.5)


def test_an_idle_gap_ends_it_even_with_rate_credit() -> None:
    pace = BodyPace(idle_s=30, min_rate=500, started=0)
    pace.arrived(1, 10_000_000)  # credit of 20,000 s at the minimum rate
    assert pace.deadline() == 31
    assert pace.expired(31)


def test_excuse_restarts_as_if_on_pace() -> None:
    pace = BodyPace(idle_s=10, min_rate=100, started=0)
    pace.arrived(1, 50)  # behind: 50 bytes in 1 s would allow 10.5 s in all
    assert pace.deadline() == pytest.approx(10.5)
    pace.excuse(40)  # the router held reading for a long time
    assert pace.deadline() == pytest.approx(50)
    assert not pace.expired(49)


def test_a_timer_a_little_early_counts_as_on_time() -> None:
    pace = BodyPace(idle_s=1, min_rate=0, started=0)
    assert pace.expired(1 - EARLY_S / 2)
    assert not pace.expired(1 - 2 * EARLY_S)
