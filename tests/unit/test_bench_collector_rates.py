"""bench/collector's rate search: up the ladder to the first rate that drops, bisection
between it and the last that did not, down when the first rung drops, and an end when the
sender falls short."""

from __future__ import annotations

from bench.collector.rates import RateSearch


def run(search: RateSearch, capacity: float, sender_most: float = float("inf")) -> list[float]:
    tried = []
    while (rate := search.next()) is not None:
        tried.append(rate)
        # A sender short of the rate reports the rate it kept.
        search.record(min(rate, sender_most), rate <= capacity, rate <= sender_most)
    return tried


def test_the_ladder_doubles_then_bisects_the_bracket() -> None:
    search = RateSearch(5_000, 1_000_000, bisections=2)
    assert run(search, capacity=50_000) == [5_000, 10_000, 20_000, 40_000, 80_000, 60_000, 50_000]
    assert search.best == 50_000


def test_the_last_rung_is_the_most_and_a_pass_there_ends_it() -> None:
    search = RateSearch(5_000, 30_000, bisections=2)
    assert run(search, capacity=1e9) == [5_000, 10_000, 20_000, 30_000]
    assert search.best == 30_000


def test_a_first_rung_that_drops_goes_down_then_bisects() -> None:
    search = RateSearch(8_000, 100_000, bisections=1)
    assert run(search, capacity=3_000) == [8_000, 4_000, 2_000, 3_000]
    assert search.best == 3_000


def test_nothing_passes_after_the_down_steps() -> None:
    search = RateSearch(8_000, 100_000)
    assert run(search, capacity=10) == [8_000, 4_000, 2_000, 1_000]
    assert search.best == 0


def test_a_rate_the_sender_cannot_reach_ends_the_search() -> None:
    search = RateSearch(5_000, 1_000_000)
    assert run(search, capacity=1e9, sender_most=30_000) == [5_000, 10_000, 20_000, 40_000]
    assert search.best == 30_000


def test_bisection_stops_at_the_resolution() -> None:
    search = RateSearch(100_000, 1_000_000, bisections=10)
    tried = run(search, capacity=150_000)
    assert tried[:2] == [100_000, 200_000]
    assert 140_000 <= search.best <= 150_000
    assert len(tried) <= 2 + 5
