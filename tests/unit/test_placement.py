from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from router.db.inet import encode_address
from router.routing.placement import (
    deal,
    flow_key_hash,
    flow_shard,
    jump_hash,
    rng_for,
    split,
)


@given(st.integers(0, 300_000), st.integers(1, 50_000), st.integers(1, 16))
def test_split_covers_every_row_once(count: int, batch: int, shards: int) -> None:
    ranges = split(count, batch, shards)
    covered = [i for r in ranges for i in r]
    assert covered == list(range(count))
    assert all(len(r) <= max(batch, 1) or len(ranges) >= shards for r in ranges)
    assert all(len(r) > 0 for r in ranges)


def test_large_tables_use_every_shard() -> None:
    assert len(split(60_000, 20_000, 6)) == 6
    assert len(split(500, 20_000, 6)) == 1


def test_deal_is_seeded_and_balanced() -> None:
    parts = [f"p{i}" for i in range(12)]
    shards = ["a", "b", "c", "d", "e", "f"]
    first = deal(parts, shards, rng_for("key-1"))
    assert first == deal(parts, shards, rng_for("key-1"))
    assert Counter(first.values()) == dict.fromkeys(shards, 2)


@given(st.integers(0, 2**64 - 1), st.integers(1, 64))
def test_jump_hash_moves_only_to_the_new_bucket(key: int, buckets: int) -> None:
    before = jump_hash(key, buckets)
    after = jump_hash(key, buckets + 1)
    assert 0 <= before < buckets
    assert after in (before, buckets)


def test_flow_hash_spreads_and_is_stable() -> None:
    ring = [f"shard{i:02d}" for i in range(1, 7)]
    counts = Counter()
    for n in range(6000):
        key = flow_key_hash(
            encode_address(f"10.0.{n // 256}.{n % 256}"),
            encode_address("192.168.1.1"),
            1000 + n,
            443,
            6,
        )
        counts[flow_shard(key, ring)] += 1
    assert all(800 < c < 1200 for c in counts.values()), counts
    one = flow_key_hash(encode_address("2001:db8::1"), encode_address("2001:db8::2"), 1, 2, None)
    same = flow_key_hash(
        encode_address("2001:DB8:0:0:0:0:0:1"), encode_address("2001:db8::2"), 1, 2, None
    )
    assert one == same
