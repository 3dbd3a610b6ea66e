"""Which rate bench/collector tries next, as a value: up a ladder (start, then doubling, the
last rung ``most``) until a rate drops flows, then ``bisections`` midpoints between the
highest rate that dropped none and the lowest that dropped some. When the first rung already
drops, the ladder goes down (halving, at most DOWN_STEPS times) before bisecting. A rate the
sender could not reach ends the search: nothing above it can be judged. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

DOWN_STEPS = 3
# Bisection stops once the bracket is this narrow (relative to the rate that passed).
RESOLUTION = 0.05


@dataclass
class RateSearch:
    start: float
    most: float
    bisections: int = 2
    passed: float | None = None
    failed: float | None = None
    tried: list[tuple[float, bool]] = field(default_factory=list)
    ended: bool = False

    def next(self) -> float | None:
        """The next rate to try; None when the search is over."""
        if self.ended:
            return None
        if not self.tried:
            return min(self.start, self.most)
        if self.failed is None:
            assert self.passed is not None
            return None if self.passed >= self.most else min(self.passed * 2, self.most)
        if self.passed is None:
            downs = sum(1 for _, ok in self.tried if not ok) - 1
            return None if downs >= DOWN_STEPS else self.failed / 2
        bisected = len(self.tried) - self._ladder_steps()
        if bisected >= self.bisections or self.failed - self.passed <= RESOLUTION * self.passed:
            return None
        return round((self.passed + self.failed) / 2)

    def record(self, rate: float, ok: bool, reached: bool = True) -> None:
        """The outcome of ``rate``: no flow dropped (``ok``), and whether the sender kept it."""
        self.tried.append((rate, ok))
        if ok and (self.passed is None or rate > self.passed):
            self.passed = rate
        if not ok and (self.failed is None or rate < self.failed):
            self.failed = rate
        if not reached:
            self.ended = True

    @property
    def best(self) -> float:
        """The highest rate that dropped nothing (0: none did)."""
        return self.passed or 0.0

    def _ladder_steps(self) -> int:
        """Tries before bisection began: up to and including the first pass after a failure
        when going down, or the first failure when going up."""
        for index, (_, ok) in enumerate(self.tried):
            if not ok:
                first_fail = index
                break
        else:
            return len(self.tried)
        if first_fail > 0:
            return first_fail + 1
        for index, (_, ok) in enumerate(self.tried):
            if ok:
                return index + 1
        return len(self.tried)
