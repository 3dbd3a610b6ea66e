"""Where rows go inside a group. Pure: no I/O.

Audit rows may live on any shard of their owner's group, so a request's rows are cut into parts
(at most ``batch_rows`` each; large tables into at least one part per shard so that every shard
works in parallel) and the parts are dealt to the group's healthy shards in a random order,
seeded by the Idempotency-Key when there is one.

Flows are placed by a hash of their 5-tuple so that a repeated flow meets its earlier row and
merges with it. Jump consistent hashing over the group's shards in name order: adding a shard
(named after the others) moves only the flows the new shard takes.
"""

from __future__ import annotations

import hashlib
import math
import random
import zlib
from collections.abc import Sequence

MIN_PART_ROWS = 1000
_MIX = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1


def split(count: int, batch_rows: int, shards: int) -> list[range]:
    """Contiguous, near-equal ranges covering 0..count."""
    if count <= 0:
        return []
    parts = max(math.ceil(count / batch_rows), min(shards, count // MIN_PART_ROWS), 1)
    size, extra = divmod(count, parts)
    ranges, start = [], 0
    for index in range(parts):
        stop = start + size + (1 if index < extra else 0)
        ranges.append(range(start, stop))
        start = stop
    return ranges


def rng_for(seed: str | None) -> random.Random:
    if seed is None:
        return random.Random()
    return random.Random(hashlib.blake2b(seed.encode(), digest_size=8).digest())


def deal(parts: Sequence[str], shards: Sequence[str], rng: random.Random) -> dict[str, str]:
    """Give each part a shard: round-robin over a shuffled shard order, from a random start."""
    if not shards:
        raise ValueError("no shard to place parts on")
    order = list(shards)
    rng.shuffle(order)
    return {part: order[index % len(order)] for index, part in enumerate(parts)}


def fallback(shards: Sequence[str], excluded: set[str], rng: random.Random) -> str | None:
    candidates = [shard for shard in shards if shard not in excluded]
    return rng.choice(candidates) if candidates else None


def jump_hash(key: int, buckets: int) -> int:
    """Lamping & Veach's jump consistent hash."""
    result, candidate = -1, 0
    while candidate < buckets:
        result = candidate
        key = (key * 2862933555777941757 + 1) & _MASK
        candidate = int((result + 1) * ((1 << 31) / ((key >> 33) + 1)))
    return result


def flow_key_hash(
    src_ip: bytes, dst_ip: bytes, src_port: int, dst_port: int, proto: int | None
) -> int:
    packed = b"%b|%b|%d|%d|%d" % (
        src_ip,
        dst_ip,
        src_port,
        dst_port,
        -1 if proto is None else proto,
    )
    return (zlib.crc32(packed) * _MIX) & _MASK


def flow_shard(key_hash: int, ring: Sequence[str]) -> str:
    return ring[jump_hash(key_hash, len(ring))]
