"""Per-token limits of one router process: requests per second and write bytes per second
(token buckets), and searches running at once. Past a limit: 429 with Retry-After.

Buckets are per router: N routers let a token through N times the rate. The clock is passed
in, so the arithmetic is tested without sleeping."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from router.errors import Overloaded

Clock = Callable[[], float]


class Bucket:
    """``rate`` units per second, holding at most ``capacity``. ``take`` refuses when the units
    are not there; ``charge`` takes them anyway and may leave a debt that later requests wait
    out (a body's size is known only once it was read)."""

    __slots__ = ("capacity", "level", "rate", "stamp")

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self.level = capacity
        self.stamp = now

    def _refill(self, now: float) -> None:
        if now > self.stamp:
            self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
            self.stamp = now

    def take(self, amount: float, now: float) -> float:
        """0 when taken; otherwise the seconds until ``amount`` is there (nothing taken)."""
        self._refill(now)
        if self.level >= amount:
            self.level -= amount
            return 0.0
        return (amount - self.level) / self.rate

    def charge(self, amount: float, now: float) -> None:
        self._refill(now)
        self.level -= amount

    def debt(self, now: float) -> float:
        """Seconds until the bucket is out of debt (0: it is not in debt)."""
        self._refill(now)
        return 0.0 if self.level >= 0 else -self.level / self.rate


def retry_after(seconds: float) -> int:
    return max(1, math.ceil(seconds))


@dataclass(frozen=True)
class LimitValues:
    rate_per_s: float  # 0: none
    burst_s: float
    ingest_bytes_per_s: int  # 0: none
    max_searches: int


class TokenLimiter:
    """The limits of one token in this router."""

    def __init__(self, values: LimitValues, clock: Clock) -> None:
        self._clock = clock
        self.searches = 0
        self.configure(values)

    def configure(self, values: LimitValues) -> None:
        """New limits (full buckets); searches running keep their slots."""
        self.values = values
        now = self._clock()
        rate, nbytes = values.rate_per_s, values.ingest_bytes_per_s
        self._requests = Bucket(rate, max(1.0, rate * values.burst_s), now) if rate else None
        self._bytes = Bucket(nbytes, max(1.0, nbytes * values.burst_s), now) if nbytes else None

    def admit(self) -> None:
        """One request; 429 past the token's rate."""
        if self._requests is None:
            return
        wait = self._requests.take(1.0, self._clock())
        if wait:
            raise Overloaded(
                f"this token may make {self.values.rate_per_s:g} requests per second; retry "
                "after Retry-After seconds",
                retry_after_s=retry_after(wait),
            )

    def admit_write(self) -> None:
        """A write; 429 while the token's earlier writes are over its byte rate."""
        if self._bytes is None:
            return
        wait = self._bytes.debt(self._clock())
        if wait:
            raise Overloaded(
                f"this token may write {self.values.ingest_bytes_per_s} bytes per second; retry "
                "after Retry-After seconds",
                retry_after_s=retry_after(wait),
            )

    def charge_bytes(self, amount: int) -> None:
        if self._bytes is not None:
            self._bytes.charge(amount, self._clock())

    def enter_search(self) -> None:
        if self.searches >= self.values.max_searches:
            raise Overloaded(
                f"this token already runs {self.searches} searches or exports in this router, "
                f"its limit; retry when one ended",
                retry_after_s=1,
            )
        self.searches += 1

    def leave_search(self) -> None:
        self.searches -= 1


class Limiters:
    """Every token's limiter in this router, made on first use and remade when the token's
    limits change."""

    def __init__(self, defaults: LimitValues, clock: Clock = time.monotonic) -> None:
        self.defaults = defaults
        self._clock = clock
        self._by_token: dict[str, TokenLimiter] = {}

    def values(
        self, rate_per_s: float | None, ingest_bytes_per_s: int | None, max_searches: int | None
    ) -> LimitValues:
        d = self.defaults
        return LimitValues(
            d.rate_per_s if rate_per_s is None else rate_per_s,
            d.burst_s,
            d.ingest_bytes_per_s if ingest_bytes_per_s is None else ingest_bytes_per_s,
            d.max_searches if max_searches is None else max_searches,
        )

    def get(self, token_id: str, values: LimitValues) -> TokenLimiter:
        limiter = self._by_token.get(token_id)
        if limiter is None:
            limiter = self._by_token[token_id] = TokenLimiter(values, self._clock)
        elif limiter.values != values:
            limiter.configure(values)
        return limiter

    def forget_others(self, keep: set[str]) -> None:
        for token_id in [t for t in self._by_token if t not in keep]:
            del self._by_token[token_id]
