"""bench/ycsb's key generators against their definitions: FNV-64 as YCSB's keys have it,
zipfian frequencies against 1/i^theta / zeta(n), the scrambled variant's spread, latest's bias
to the newest acknowledged record, uniform bounds, the acknowledged counter and the weighted
choice."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from bench.ycsb.generators import (
    SCRAMBLED_ZETAN,
    ZIPFIAN_CONSTANT,
    AcknowledgedCounter,
    Discrete,
    ScrambledZipfian,
    SkewedLatest,
    UniformLong,
    Zipfian,
    fnvhash64,
    key_name,
    zeta,
)

DRAWS = 200_000


def test_fnv_hash_gives_ycsbs_key_names() -> None:
    # The first key of every YCSB load with hashed inserts (keynum 0).
    assert key_name(0) == "user6284781860667377211"
    assert fnvhash64(1) == 8517097267634966620
    assert key_name(5, zeropadding=8, ordered=True) == "user00000005"
    # FNV-1a over 8 little-endian bytes, 64-bit, sign dropped as Java's Math.abs does.
    assert all(0 <= fnvhash64(n) < 2**63 for n in range(1000))
    assert len({fnvhash64(n) for n in range(10_000)}) == 10_000


def test_zeta_is_the_partial_sum_and_grows_incrementally() -> None:
    assert zeta(1, 0.99) == 1.0
    assert zeta(3, 0.99) == pytest.approx(1 + 2**-0.99 + 3**-0.99)
    assert zeta(100, 0.99, 40, zeta(40, 0.99)) == pytest.approx(zeta(100, 0.99))


def test_zipfian_frequencies_follow_the_definition() -> None:
    items = 100
    generator = Zipfian(0, items - 1, random.Random(3))
    counts = Counter(generator.next() for _ in range(DRAWS))
    zetan = zeta(items, ZIPFIAN_CONSTANT)
    expected = [(1 / (i + 1) ** ZIPFIAN_CONSTANT) / zetan for i in range(items)]
    observed = [counts[i] / DRAWS for i in range(items)]
    assert set(counts) <= set(range(items))
    # The two most popular items are drawn exactly by their probability (Gray's method).
    for rank in (0, 1):
        assert observed[rank] == pytest.approx(expected[rank], rel=0.03)
    # The rest by Gray's approximation: close in total, popularity falling with rank.
    distance = sum(abs(o - e) for o, e in zip(observed, expected, strict=True)) / 2
    assert distance < 0.03
    assert observed[0] > observed[1] > observed[4] > observed[20] > observed[90]


def test_zipfian_with_a_base_and_a_growing_item_count() -> None:
    generator = Zipfian(10, 19, random.Random(4))
    assert {generator.next() for _ in range(5000)} <= set(range(10, 20))
    grown = Counter(generator.next(40) for _ in range(20_000))
    assert max(grown) >= 30 and grown.most_common(1)[0][0] == 10


def test_scrambled_zipfian_spreads_the_popular_keys() -> None:
    generator = ScrambledZipfian(0, 999, random.Random(5))
    counts = Counter(generator.next() for _ in range(DRAWS))
    assert min(counts) >= 0 and max(counts) <= 999
    hottest = [key for key, _ in counts.most_common(10)]
    # Hashing scatters the head: not the low keys, and over the whole range.
    assert not set(hottest) <= set(range(10))
    assert max(hottest) - min(hottest) > 500
    # The hottest key carries the first rank's share of the huge zipfian (1 / zeta), plus
    # whatever ranks hash onto the same key.
    share = counts.most_common(1)[0][1] / DRAWS
    assert 1 / SCRAMBLED_ZETAN * 0.9 < share < 1 / SCRAMBLED_ZETAN * 1.5
    # Every key is drawn: a long tail, not a few hot keys alone.
    assert len(counts) == 1000


def test_latest_favours_the_newest_acknowledged_records() -> None:
    counter = AcknowledgedCounter(0)
    for _ in range(2000):
        counter.acknowledge(counter.next())
    generator = SkewedLatest(counter, random.Random(6))
    counts = Counter(generator.next() for _ in range(DRAWS))
    newest = counter.last
    assert max(counts) == newest and min(counts) >= 0
    assert counts.most_common(1)[0][0] == newest
    first_share = counts[newest] / DRAWS
    assert first_share == pytest.approx(1 / zeta(newest, ZIPFIAN_CONSTANT), rel=0.05)
    recent = sum(count for key, count in counts.items() if key > newest - 100) / DRAWS
    assert recent > 0.5
    # New inserts move the head along.
    for _ in range(10):
        counter.acknowledge(counter.next())
    assert Counter(generator.next() for _ in range(20_000)).most_common(1)[0][0] == newest + 10


def test_acknowledged_counter_exposes_only_a_contiguous_prefix() -> None:
    counter = AcknowledgedCounter(100)
    assert counter.last == 99
    first, second, third = counter.next(), counter.next(), counter.next()
    counter.acknowledge(third)
    counter.acknowledge(second)
    assert counter.last == 99
    counter.acknowledge(first)
    assert counter.last == 102


def test_uniform_stays_within_its_bounds_and_covers_them() -> None:
    generator = UniformLong(5, 14, random.Random(7))
    counts = Counter(generator.next() for _ in range(50_000))
    assert set(counts) == set(range(5, 15))
    assert all(abs(count / 50_000 - 0.1) < 0.01 for count in counts.values())


def test_discrete_choice_follows_the_weights() -> None:
    chooser = Discrete([(0.95, "READ"), (0.05, "UPDATE")], random.Random(8))
    counts = Counter(chooser.next() for _ in range(DRAWS))
    assert counts["READ"] / DRAWS == pytest.approx(0.95, abs=0.005)
    assert set(counts) == {"READ", "UPDATE"}
