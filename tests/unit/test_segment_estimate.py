"""count=estimate over compacted owner-days, the arithmetic (router/search/segment_estimate.py):
what to open, the extrapolation and its bounds, checked against owner-days of segments whose
matches are known, sampled by the rule the statement uses (router/search/segment_sql.py)."""

from __future__ import annotations

import itertools
import math

from hypothesis import given
from hypothesis import strategies as st

from router.search import segment_estimate
from router.search.segment_estimate import OwnerDaySample, SegmentCount

# An owner-day: its candidate segments as (rows, matching rows).
Segments = list[tuple[int, int]]


def opened(candidates: int, share: float) -> list[bool]:
    """segment_sql.sample_sql's choice: of n candidates, m = max(1, ceil(n share)), the k-th
    (from 1) when floor(k m / n) > floor((k - 1) m / n)."""
    m = max(1, math.ceil(candidates * share))
    return [k * m // candidates > (k - 1) * m // candidates for k in range(1, candidates + 1)]


def sample(segments: Segments, share: float, counted: int = 0) -> OwnerDaySample:
    picks = opened(len(segments), share) if segments else []
    hits = sum(match for (_, match), pick in zip(segments, picks, strict=True) if pick)
    return OwnerDaySample(
        counted=counted + hits,
        hits=hits,
        opened_rows=sum(rows for (rows, _), pick in zip(segments, picks, strict=True) if pick),
        unopened_rows=sum(
            rows for (rows, _), pick in zip(segments, picks, strict=True) if not pick
        ),
    )


segment = st.integers(1, 1000).flatmap(lambda rows: st.tuples(st.just(rows), st.integers(0, rows)))
owner_day = st.tuples(st.lists(segment, max_size=60), st.integers(0, 50))


@given(st.lists(owner_day, max_size=6), st.floats(0.001, 1.0))
def test_the_bounds_hold_the_true_count_and_the_estimate(days, share) -> None:
    truth = sum(counted + sum(m for _, m in segments) for segments, counted in days)
    found = segment_estimate.extrapolate(sample(s, share, c) for s, c in days)
    assert found.low <= truth <= found.high
    assert found.low <= found.value <= found.high
    assert found.high - found.low == sum(sample(s, share).unopened_rows for s, _ in days)


@given(st.lists(owner_day, max_size=6))
def test_every_candidate_opened_is_the_exact_count(days) -> None:
    truth = sum(counted + sum(m for _, m in segments) for segments, counted in days)
    found = segment_estimate.extrapolate(sample(s, 1.0, c) for s, c in days)
    assert found == SegmentCount(truth, truth, truth) and found.exact


@given(st.integers(1, 5000), st.floats(0.0001, 1.0))
def test_the_choice_is_evenly_spaced_and_at_least_one(candidates, share) -> None:
    picks = opened(candidates, share)
    chosen = [k for k, pick in enumerate(picks) if pick]
    assert len(chosen) == max(1, math.ceil(candidates * share))
    gaps = {b - a for a, b in itertools.pairwise(chosen)}
    assert not gaps or max(gaps) - min(gaps) <= 1


def test_each_owner_day_scales_by_its_own_matches_per_row() -> None:
    dense = OwnerDaySample(counted=54, hits=50, opened_rows=100, unopened_rows=300)
    sparse = OwnerDaySample(counted=1, hits=1, opened_rows=1000, unopened_rows=1000)
    assert segment_estimate.extrapolate([dense, sparse]) == SegmentCount(
        54 + 150 + 1 + 1, 55, 55 + 1300
    )
    assert segment_estimate.extrapolate([]) == SegmentCount(0, 0, 0)


def test_the_answer_has_bounds_when_they_hold_for_all_of_it() -> None:
    exact, sampled = SegmentCount.counted(7), SegmentCount(20, 10, 40)
    answer = segment_estimate.answer
    assert answer(None, exact, False) == {
        "value": 7,
        "exact": True,
        "method": "segments",
        "bounds": [7, 7],
    }
    assert answer(None, sampled, False) == {
        "value": 20,
        "exact": False,
        "method": "segments",
        "bounds": [10, 40],
    }
    # A heap part counted shifts the bounds; one sampled or left to the planner has none.
    assert answer((5, "count"), sampled, False) == {
        "value": 25,
        "exact": False,
        "method": "count+segments",
        "bounds": [15, 45],
    }
    assert answer((5, "count"), exact, False)["exact"] is True
    for method in ("sample", "planner"):
        assert answer((5, method), exact, False) == {
            "value": 12,
            "exact": False,
            "method": f"{method}+segments",
            "bounds": None,
        }
    # A shard that failed: neither exact nor bounded.
    assert answer(None, exact, True) == {
        "value": 7,
        "exact": False,
        "method": "segments",
        "bounds": None,
    }


def test_own_and_shared_parts_add_up() -> None:
    """An owner-day's own tables' estimate and its shared rows' count (counted, or from a
    compacted shard-day's segments) as one answer."""
    counted, added = segment_estimate.counted, segment_estimate.added
    shared = counted(5, False)
    assert shared == {"value": 5, "exact": True, "method": "count", "bounds": None}
    sampled = {"value": 20, "exact": False, "method": "sample", "bounds": None}
    # A count adds no name and shifts bounds; a part without bounds leaves the sum without.
    assert added(sampled, shared, False) == {**sampled, "value": 25}
    segments = {"value": 20, "exact": False, "method": "segments", "bounds": [10, 40]}
    assert added(segments, shared, False) == {**segments, "value": 25, "bounds": [15, 45]}
    packed = {"value": 8, "exact": False, "method": "count+segments", "bounds": [6, 9]}
    assert added(sampled, packed, False) == {
        "value": 28,
        "exact": False,
        "method": "sample+segments",
        "bounds": None,
    }
    assert added(segments, packed, False) == {
        "value": 28,
        "exact": False,
        "method": "segments",
        "bounds": [16, 49],
    }
    both = added(counted(3, False), shared, False)
    assert both == {"value": 8, "exact": True, "method": "count", "bounds": None}
    # A shard that failed: neither exact nor bounded.
    assert added(segments, shared, True)["exact"] is False
    assert added(segments, shared, True)["bounds"] is None
    assert added(counted(3, False), counted(5, True), False)["exact"] is False
