"""Keys and choices as YCSB makes them: FNV-64 hashed key names, uniform, zipfian (Gray et al.,
SIGMOD 1994, with YCSB's constant 0.99), scrambled zipfian (popular items spread over the key
space by hashing), skewed latest (zipfian from the newest acknowledged insert backwards), the
acknowledged insert counter, and the weighted choice of the next operation. Written from YCSB's
definitions (site.ycsb.generator); the random source is Python's, so sequences differ from
Java's, the distributions do not."""

from __future__ import annotations

import random
from collections.abc import Sequence

FNV_OFFSET_BASIS_64 = 0xCBF29CE484222325
FNV_PRIME_64 = 1099511628211
MASK_64 = (1 << 64) - 1
ZIPFIAN_CONSTANT = 0.99
# ScrambledZipfianGenerator draws from this many items with this precomputed zeta, then hashes.
SCRAMBLED_ITEM_COUNT = 10_000_000_000_000_000
SCRAMBLED_ZETAN = 26.46902820178302


def fnvhash64(value: int) -> int:
    """YCSB's Utils.fnvhash64: FNV-1a over the 8 low-order bytes of a Java long, as a signed
    64-bit result made non-negative with Math.abs (which leaves Long.MIN_VALUE negative)."""
    hashed = FNV_OFFSET_BASIS_64
    for _ in range(8):
        hashed ^= value & 0xFF
        value >>= 8
        hashed = (hashed * FNV_PRIME_64) & MASK_64
    signed = hashed - (1 << 64) if hashed >= 1 << 63 else hashed
    return signed if signed == -(1 << 63) else abs(signed)


def key_name(keynum: int, zeropadding: int = 1, ordered: bool = False) -> str:
    """CoreWorkload.buildKeyName: 'user' + the (hashed unless ordered) number, zero-padded."""
    number = str(keynum if ordered else fnvhash64(keynum))
    return "user" + "0" * max(zeropadding - len(number), 0) + number


def zeta(count: int, theta: float, start: int = 0, initial: float = 0.0) -> float:
    """Sum of 1/i^theta for i in start+1..count (from ``initial``, the sum up to start)."""
    total = initial
    for i in range(start, count):
        total += 1 / (i + 1) ** theta
    return total


class UniformLong:
    """Integers from low to high, both included, equally likely."""

    def __init__(self, low: int, high: int, rng: random.Random) -> None:
        self.low, self.high, self._rng = low, high, rng

    def next(self) -> int:
        return self._rng.randint(self.low, self.high)


class Zipfian:
    """Items base..base+items-1, item base the most popular: P(rank i) = (1/i^theta) / zeta(n)."""

    def __init__(
        self,
        low: int,
        high: int,
        rng: random.Random,
        theta: float = ZIPFIAN_CONSTANT,
        zetan: float | None = None,
    ) -> None:
        self.base = low
        self.items = high - low + 1
        self.theta = theta
        self._rng = rng
        self._zeta2 = zeta(2, theta)
        self._alpha = 1 / (1 - theta)
        self._zetan = zeta(self.items, theta) if zetan is None else zetan
        self._count_for_zeta = self.items
        self._eta = self._eta_for(self._zetan)

    def _eta_for(self, zetan: float) -> float:
        # YCSB keeps the first item count here even after the count grows; so do we.
        return float((1 - (2.0 / self.items) ** (1 - self.theta)) / (1 - self._zeta2 / zetan))

    def next(self, itemcount: int | None = None) -> int:
        count = self.items if itemcount is None else itemcount
        if count > self._count_for_zeta:
            # More items than last time: zeta grows incrementally (YCSB never shrinks it).
            self._zetan = zeta(count, self.theta, self._count_for_zeta, self._zetan)
            self._count_for_zeta = count
            self._eta = self._eta_for(self._zetan)
        u = self._rng.random()
        uz = u * self._zetan
        if uz < 1.0:
            return self.base
        if uz < 1.0 + 0.5**self.theta:
            return self.base + 1
        return self.base + int(count * (self._eta * u - self._eta + 1) ** self._alpha)


class ScrambledZipfian:
    """Zipfian popularity over low..high, the popular items scattered by hashing: a zipfian draw
    from a huge item space, FNV-hashed, modulo the item count."""

    def __init__(self, low: int, high: int, rng: random.Random) -> None:
        self.low = low
        self.itemcount = high - low + 1
        self._zipfian = Zipfian(0, SCRAMBLED_ITEM_COUNT, rng, zetan=SCRAMBLED_ZETAN)

    def next(self) -> int:
        return self.low + fnvhash64(self._zipfian.next()) % self.itemcount


class AcknowledgedCounter:
    """Insert key numbers handed out in order; ``last`` is the highest number below which every
    insert was acknowledged, so readers never pick a key whose insert is still in flight."""

    def __init__(self, start: int) -> None:
        self._next = start
        self.last = start - 1
        self._acknowledged: set[int] = set()

    def next(self) -> int:
        value = self._next
        self._next += 1
        return value

    def acknowledge(self, value: int) -> None:
        self._acknowledged.add(value)
        while self.last + 1 in self._acknowledged:
            self.last += 1
            self._acknowledged.discard(self.last)


class SkewedLatest:
    """The newest acknowledged key most popular, then the one before, zipfian-wise."""

    def __init__(self, basis: AcknowledgedCounter, rng: random.Random) -> None:
        self._basis = basis
        self._zipfian = Zipfian(0, max(basis.last, 1) - 1, rng)

    def next(self) -> int:
        newest = self._basis.last
        return newest - self._zipfian.next(newest)


class Discrete:
    """One of the values, each with the probability of its weight over the weights' sum."""

    def __init__(self, weighted: Sequence[tuple[float, str]], rng: random.Random) -> None:
        self._weighted = list(weighted)
        self._total = sum(weight for weight, _ in self._weighted)
        self._rng = rng

    def next(self) -> str:
        point = self._rng.random() * self._total
        for weight, value in self._weighted:
            if point < weight:
                return value
            point -= weight
        return self._weighted[-1][1]
