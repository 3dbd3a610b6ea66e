"""The compaction throttle's arithmetic (router/compaction/pace.py): how long a run waits
after a copy so that its rows per elapsed second stay within the limit."""

from __future__ import annotations

import pytest

from router.compaction.pace import pause_s


@pytest.mark.parametrize(
    ("rows", "elapsed_s", "limit", "expected"),
    [
        (1000, 0.5, 0, 0.0),  # unthrottled
        (1000, 0.0, 1000, 1.0),  # no time spent yet: the whole second
        (1000, 0.25, 1000, 0.75),  # the rest of it
        (1000, 1.0, 1000, 0.0),  # exactly at the limit
        (1000, 3.0, 1000, 0.0),  # slower than the limit: no wait, no credit owed
        (0, 0.0, 500, 0.0),  # nothing copied (an empty owner-day)
        (300, 0.1, 150, 1.9),
    ],
)
def test_a_copy_waits_for_the_rows_it_is_ahead_of_the_limit(
    rows: int, elapsed_s: float, limit: float, expected: float
) -> None:
    assert pause_s(rows, elapsed_s, limit) == pytest.approx(expected)


@pytest.mark.parametrize("limit", [1.0, 37.5, 150.0, 10_000.0])
@pytest.mark.parametrize("elapsed_s", [0.0, 0.01, 0.5, 2.0])
def test_after_the_wait_the_rate_is_within_the_limit(limit: float, elapsed_s: float) -> None:
    rows = 1234
    waited = pause_s(rows, elapsed_s, limit)
    assert waited >= 0
    assert rows / (elapsed_s + waited) <= limit * (1 + 1e-12)
    # And no longer than needed: either no wait, or the rate is exactly the limit.
    assert waited == 0 or rows / (elapsed_s + waited) == pytest.approx(limit)
