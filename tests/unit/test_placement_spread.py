"""Spread width and balanced dealing (router/routing/placement.py), exhaustively and by
property: an owner-day spread over some shards stays within +/-10 % of an equal share."""

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router.routing.placement import (
    deal,
    deal_least,
    rng_for,
    split,
    spread_order,
    spread_shards,
    widened,
)

SHARDS = [f"shard{i:02d}" for i in range(1, 13)]
BATCH_ROWS = 20_000


def test_spread_order_is_a_stable_permutation() -> None:
    for owner in range(200):
        order = spread_order(owner, SHARDS)
        assert sorted(order) == SHARDS
        assert order == spread_order(owner, list(reversed(SHARDS)))


def test_spread_order_differs_between_owners() -> None:
    firsts = Counter(spread_order(owner, SHARDS)[0] for owner in range(1200))
    assert set(firsts) == set(SHARDS)
    assert all(60 < count < 140 for count in firsts.values()), firsts


@given(st.integers(1, 10**12), st.integers(1, 12), st.integers(1, 12))
def test_a_wider_spread_keeps_the_narrower_shards(owner: int, narrow: int, wide: int) -> None:
    narrow, wide = min(narrow, wide), max(narrow, wide)
    small = spread_shards(owner, SHARDS, narrow, set(SHARDS))
    large = spread_shards(owner, SHARDS, wide, set(SHARDS))
    assert len(small) == narrow and len(large) == wide
    assert set(small) <= set(large)


@given(st.integers(1, 10**12), st.integers(2, 12))
def test_removing_a_shard_moves_only_its_share(owner: int, spread: int) -> None:
    before = spread_shards(owner, SHARDS, spread, set(SHARDS))
    gone = before[0]
    rest = [shard for shard in SHARDS if shard != gone]
    after = spread_shards(owner, rest, spread, set(rest))
    assert set(before) - {gone} <= set(after)


def test_spread_none_is_the_whole_group_and_spread_is_capped() -> None:
    assert sorted(spread_shards(7, SHARDS, None, set(SHARDS))) == SHARDS
    assert sorted(spread_shards(7, SHARDS[:3], 8, set(SHARDS))) == SHARDS[:3]


def test_unusable_shards_are_skipped_then_the_next_in_order_is_taken() -> None:
    order = spread_order(42, SHARDS)
    assert spread_shards(42, SHARDS, 2, set(order[1:])) == [order[1]]
    assert spread_shards(42, SHARDS, 2, set(order[2:])) == [order[2]]
    # Nothing usable at all: the spread as it is (better to try than refuse).
    assert spread_shards(42, SHARDS, 2, set()) == order[:2]
    with pytest.raises(ValueError):
        spread_shards(42, [], 2, set())


def test_widened_doubles_until_the_rows_fit_then_takes_the_group() -> None:
    assert widened(2, 12, 500_000, 250_000) == 2
    assert widened(2, 12, 500_001, 250_000) == 4
    assert widened(2, 12, 1_900_000, 250_000) == 8
    assert widened(2, 12, 2_000_001, 250_000) is None
    assert widened(2, 3, 500_001, 250_000) is None
    assert widened(2, 2, 10**9, 250_000) is None
    assert widened(2, 2, 10, 250_000) == 2  # small: unchanged, even at the group's size
    assert widened(None, 12, 0, 250_000) is None
    assert widened(4, 12, 10, 250_000) == 4  # never narrower


def test_deal_least_fills_the_emptiest_shard_first() -> None:
    held = {"a": 500, "b": 0, "c": 200}
    dealt = deal_least([("p0", 300), ("p1", 300)], ["a", "b", "c"], held, rng_for("k"))
    assert dealt["p0"] == "b"
    assert dealt["p1"] == "c"  # b holds 300 then, c 200


def test_deal_least_is_seeded_and_spreads_equal_parts() -> None:
    parts = [(f"p{i}", 1000) for i in range(12)]
    shards = ["a", "b", "c", "d", "e", "f"]
    first = deal_least(parts, shards, {}, rng_for("key-1"))
    assert first == deal_least(parts, shards, {}, rng_for("key-1"))
    assert Counter(first.values()) == dict.fromkeys(shards, 2)
    with pytest.raises(ValueError):
        deal_least(parts, [], {}, rng_for(None))


Request = list[tuple[int, int]]  # (owner, rows of its one owner-day in the request)
GROUP = SHARDS[:6]
TRACKED = 0  # the owner-day every generated request writes to
sizes = st.one_of(st.integers(1, 50), st.integers(51, 5_000))
requests_strategy = st.lists(
    st.lists(st.tuples(st.integers(0, 9), sizes), min_size=0, max_size=11).flatmap(
        lambda others: sizes.map(lambda rows: [(TRACKED, rows), *others])
    ),
    min_size=100,
    max_size=120,
)


def place(
    requests: list[Request], spreads: dict[int, int | None], *, old: bool = False
) -> tuple[dict[int, Counter[str]], dict[int, int]]:
    """Rows of each owner-day per shard after ``requests`` dealt as the router deals them
    (``old``: one round-robin over a shuffled order per request, as before), and the largest
    part each owner-day got."""
    held: dict[int, Counter[str]] = {owner: Counter() for owner in spreads}
    largest: Counter[int] = Counter()
    for number, request in enumerate(requests):
        rng = rng_for(f"request-{number}")
        merged: Counter[int] = Counter()
        for owner, rows in request:
            merged[owner] += rows
        parts: dict[str, tuple[int, int]] = {}  # part id -> (owner, rows)
        dealt: dict[str, str] = {}
        for owner in sorted(merged):
            subset = GROUP if old else spread_shards(owner, GROUP, spreads[owner], set(GROUP))
            spans = split(merged[owner], BATCH_ROWS, len(subset))
            mine = [(f"{owner}:{index}", len(span)) for index, span in enumerate(spans)]
            parts.update((part, (owner, rows)) for part, rows in mine)
            largest[owner] = max(largest[owner], *(rows for _, rows in mine))
            if not old:
                dealt.update(deal_least(mine, subset, held[owner], rng))
        if old:
            dealt = deal(list(parts), GROUP, rng)
        for part, shard in dealt.items():
            owner, rows = parts[part]
            held[owner][shard] += rows
    return held, dict(largest)


def worst_share(counts: Counter[str], shards: list[str]) -> float:
    return max(counts[shard] for shard in shards) / sum(counts.values())


@settings(max_examples=80, deadline=None)
@given(requests_strategy, st.lists(st.sampled_from([1, 2, 3, 4, None]), min_size=10, max_size=10))
def test_an_owner_day_after_100_mixed_requests_is_within_10_percent(
    requests: list[Request], widths: list[int | None]
) -> None:
    spreads = dict(enumerate(widths))
    held, largest = place(requests, spreads)
    for owner, counts in held.items():
        subset = spread_shards(owner, GROUP, spreads[owner], set(GROUP))
        assert set(counts) <= set(subset)
        loads = [counts[shard] for shard in subset]
        # Dealing to the least-loaded shard keeps every shard within one part of the others.
        assert max(loads) - min(loads) <= largest.get(owner, 0)
    counts, subset = held[TRACKED], spread_shards(TRACKED, GROUP, spreads[TRACKED], set(GROUP))
    total, width = sum(counts.values()), len(subset)
    # Hence within 10 % of an equal share once no part exceeds a tenth of a share (spread
    # over the others): true of 100 mixed requests but when nearly all are tiny.
    if largest[TRACKED] * 10 * (width - 1) <= total:
        share = total / width
        assert all(abs(counts[shard] - share) <= 0.1 * share for shard in subset), counts


def test_mixed_requests_balance_where_the_old_dealing_skewed() -> None:
    generator = random.Random(20)
    requests = [
        [
            (owner, generator.choice([generator.randint(1, 50), generator.randint(51, 5_000)]))
            for owner in generator.sample(range(10), generator.randint(1, 10))
        ]
        for _ in range(400)
    ]
    spreads: dict[int, int | None] = dict.fromkeys(range(10))
    before, _ = place(requests, spreads, old=True)
    after, _ = place(requests, spreads)
    for owner in range(10):
        assert sum(1 for request in requests if owner in dict(request)) >= 100
        assert worst_share(after[owner], GROUP) <= 1.1 / len(GROUP)
    assert max(worst_share(before[owner], GROUP) for owner in range(10)) > 1.1 / len(GROUP)
