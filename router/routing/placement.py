"""Where rows go inside a group. Pure: no I/O.

Audit rows may live on any shard of their owner's group, so a request's rows are cut into parts
(at most ``batch_rows`` each; large tables into at least one part per shard so that every shard
works in parallel). An owner's rows go to the first ``spread`` shards of its group in its own
rendezvous order (highest random weight of (owner id, shard name): every router agrees, and a
wider spread keeps the shards of a narrower one), or to the whole group when its spread is None.
Each part goes to the shard of that subset holding the fewest rows of its owner-day so far
(``deal_least``, over a router-side count), ties broken in a random order seeded by the
Idempotency-Key when there is one.

Flows are placed by a hash of their 5-tuple so that a repeated flow meets its earlier row and
merges with it. Jump consistent hashing over the group's shards in name order: adding a shard
(named after the others) moves only the flows the new shard takes.
"""

from __future__ import annotations

import hashlib
import math
import random
import zlib
from collections.abc import Collection, Iterable, Mapping, Sequence

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


def _weight(owner_id: int, shard: str) -> int:
    digest = hashlib.blake2b(b"%d|%b" % (owner_id, shard.encode()), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def spread_order(owner_id: int, shards: Iterable[str]) -> list[str]:
    """The owner's rendezvous order of ``shards``: heaviest weight first, by name on a tie."""
    return sorted(shards, key=lambda shard: (-_weight(owner_id, shard), shard))


def spread_shards(
    owner_id: int, shards: Sequence[str], spread: int | None, usable: Collection[str]
) -> list[str]:
    """The shards an owner's new rows may go to: the first ``spread`` of its rendezvous order
    over ``shards`` (all of them when ``spread`` is None) that are ``usable``; when none of
    those is, the first usable shard after them (a search finds it: the day-table registry
    records every shard written to)."""
    if not shards:
        raise ValueError("no shard to place parts on")
    order = spread_order(owner_id, shards)
    width = len(order) if spread is None else max(1, min(spread, len(order)))
    chosen = [shard for shard in order[:width] if shard in usable]
    if chosen:
        return chosen
    beyond = [shard for shard in order[width:] if shard in usable]
    return beyond[:1] or order[:width]


def widened(spread: int | None, shards: int, day_rows: int, rows_per_shard: int) -> int | None:
    """The spread an owner needs once one of its owner-days holds ``day_rows``: doubled until
    each of its shards holds at most ``rows_per_shard`` of that day, None (the whole group)
    once that reaches the group's ``shards``. Never narrower than ``spread``."""
    if spread is None or day_rows <= spread * rows_per_shard:
        return spread
    width = max(1, spread)
    while day_rows > width * rows_per_shard and width < shards:
        width *= 2
    return None if width >= shards else width


def deal_least(
    parts: Sequence[tuple[str, int]],
    shards: Sequence[str],
    held: Mapping[str, int],
    rng: random.Random,
) -> dict[str, str]:
    """Give each part of one owner-day, given as (part id, rows), a shard of ``shards``: the
    one holding the fewest rows of that owner-day so far (``held``, plus the parts dealt
    before it), larger parts first, ties broken by a shuffled order of ``shards``."""
    if not shards:
        raise ValueError("no shard to place parts on")
    order = list(shards)
    rng.shuffle(order)
    load = {shard: held.get(shard, 0) for shard in order}
    dealt: dict[str, str] = {}
    for part, rows in sorted(parts, key=lambda part: -part[1]):
        shard = min(order, key=load.__getitem__)
        dealt[part] = shard
        load[shard] += rows
    return dealt


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
