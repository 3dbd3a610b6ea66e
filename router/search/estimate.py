"""count=estimate, the pure part: what a sample says, how sure it is, and what to do next.

A search with no pattern or flow filter is estimated by the planner (the time column's
histogram). Otherwise the range is sampled and all conditions are evaluated together on the
sample, so patterns or filters that go together are counted as they occur together, which
the planner cannot do (it multiplies their selectivities):

- audit: TABLESAMPLE SYSTEM of a fraction of each day table's pages, summed per page. The
  matching rows are the planner's rows in the range times the share of the sampled rows in
  the range that match (a ratio estimate: how many of a table's pages fall in a narrow range is
  itself a matter of chance). When the sample contradicts the planner's rows in the range (a
  day table that grew since it was last analysed), the sample's own scaling is used instead:
  each table's matches times its pages over the pages read.
- flows: 1 ... 16 of the 256 classes of the sample index (router/db/ddl.py), read without
  touching the table and only within the range; matches are scaled by 256 over the classes
  read. Pages would not do: the merge writes a batch sorted by source, so a page holds few
  sources.

Each estimate comes with its relative standard error, from the variance between the sampled
pages (audit) or of the binomial draw (flows). A first sample whose error is at most
``target_error`` is the answer. Otherwise one larger sample aims at that error within
``max_sample_rows``, and the rows are counted instead when the range holds few rows or the
sample would read half as many rows as the count.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from router.db.ddl import FLOW_SAMPLE_CLASSES, FLOW_SAMPLE_STRIDE
from router.settings import SearchSettings

# A sample that reads this share of the rows a count would read (those in the range) costs
# about what the count does: the count is made instead. Sampled pages outside the range cost
# little each, but a narrow range of a large table is cheaper to count than to sample.
COUNT_ABOVE_SHARE = 0.5
# The second sample aims a little past the target, as the error it is sized by is itself
# estimated.
GROWTH_MARGIN = 1.25
# The planner's rows in the range are taken unless the sample puts them this many of its own
# standard errors away.
PLANNER_TOLERANCE = 3.0
# Audit samples draw at least this many pages of each day table (all of a smaller one), so
# that a small table is not left out of the sample by chance.
MIN_PAGES = 16
FLOW_FRACTIONS = (1 / FLOW_SAMPLE_CLASSES, FLOW_SAMPLE_STRIDE / FLOW_SAMPLE_CLASSES)


@dataclass(frozen=True)
class Limits:
    first_fraction: float
    target_error: float
    max_sample_rows: int
    count_below_rows: int

    @classmethod
    def of(cls, settings: SearchSettings) -> Limits:
        return cls(
            settings.estimate_sample_fraction,
            settings.estimate_target_error,
            settings.estimate_max_sample_rows,
            settings.estimate_count_below_rows,
        )


@dataclass(frozen=True)
class PageSums:
    """One audit day table's sample: sums over the pages read of each page's matching rows
    (h), rows in the range (r), their squares and product; and the rows read."""

    pages: int
    percent: float
    pages_read: int
    hits: float
    hits_sq: float
    in_range: float
    in_range_sq: float
    cross: float
    read: int


@dataclass(frozen=True)
class Total:
    """An estimated total and its variance."""

    value: float
    variance: float

    def __add__(self, other: Total) -> Total:
        return Total(self.value + other.value, self.variance + other.variance)


def _scaled(table: PageSums, total: float, squares: float) -> Total:
    """A per-page quantity's total over the table: its sum over the pages read, scaled by
    pages over pages read, with the variance of that scaling (without replacement)."""
    if table.percent >= 100:
        return Total(total, 0.0)
    n = table.pages_read
    if n < 2:
        return Total(total * table.pages / n if n else 0.0, math.inf if table.pages else 0.0)
    spread = max(squares - total * total / n, 0.0) / (n - 1)
    share = n / table.pages
    return Total(total / share, table.pages**2 * (1 - share) * spread / n)


@dataclass(frozen=True)
class Tally:
    hits: int  # matching rows in the sample
    read: int  # rows the sample read
    matches: Total  # matching rows in the range, scaled from the sample alone
    in_range: Total  # rows in the range, scaled from the sample alone
    readable: float  # rows the sample would read at fraction 1
    # The variance of the ratio estimate (matches over rows in range, times the planner's
    # rows in range); None for flows, which are sampled within the range.
    ratio_variance: float | None = None

    @property
    def fraction(self) -> float:
        """The share of the readable rows this sample read."""
        return self.read / self.readable if self.readable else 1.0


def audit_tally(tables: Sequence[PageSums]) -> Tally:
    matches = in_range = Total(0.0, 0.0)
    readable = 0.0
    for table in tables:
        matches += _scaled(table, table.hits, table.hits_sq)
        in_range += _scaled(table, table.in_range, table.in_range_sq)
        readable += _scaled(table, table.read, 0.0).value
    ratio = matches.value / in_range.value if in_range.value else 0.0
    residual = Total(0.0, 0.0)
    for table in tables:
        # Per page: d = h - ratio * r, whose scaled total has the ratio estimate's variance.
        total = table.hits - ratio * table.in_range
        squares = table.hits_sq - 2 * ratio * table.cross + ratio**2 * table.in_range_sq
        residual += _scaled(table, total, squares)
    hits = round(sum(t.hits for t in tables))
    read = sum(t.read for t in tables)
    return Tally(hits, read, matches, in_range, readable, residual.variance)


def flow_classes(fraction: float) -> int:
    """The number of sample classes that reads at least ``fraction`` of the rows (1 to 16)."""
    wanted = math.ceil(fraction * FLOW_SAMPLE_CLASSES - 1e-9)
    return min(max(wanted, 1), FLOW_SAMPLE_STRIDE)


def flow_tally(counts: Iterable[tuple[int, int]], classes: int) -> Tally:
    """From each day table's (matching, in range) rows among ``classes`` of the 256 sample
    classes: every row is in the sample with the same chance, independently of its page."""
    share = classes / FLOW_SAMPLE_CLASSES
    hits = in_range = 0
    for matching, ranged in counts:
        hits += matching
        in_range += ranged

    def scaled(count: int) -> Total:
        return Total(count / share, count * (1 - share) / share**2)

    # The index holds rows of the range only: what it reads is what is in range.
    return Tally(hits, in_range, scaled(hits), scaled(in_range), in_range / share)


@dataclass(frozen=True)
class Estimate:
    value: float
    error: float  # relative standard error
    in_range: float  # the rows in the range it took
    by_planner: bool = False  # the ratio estimate on the planner's rows in the range


def estimate(
    found: Tally, planner_range: float | None, planner_agreed: bool | None = None
) -> Estimate:
    """The sample's estimate: the ratio estimate on the planner's rows in the range when the
    sample agrees with them, else the sample's own scaling. ``planner_agreed``: what the first
    sample of this estimate found (a larger sample keeps to it: whether the statistics are
    stale is the table's, and asking again at each sample would double the false alarms)."""
    matches, in_range = found.matches, found.in_range
    if planner_range is None or found.ratio_variance is None or in_range.value <= 0:
        agrees = False
    elif planner_agreed is None:
        tolerance = PLANNER_TOLERANCE * math.sqrt(in_range.variance)
        agrees = abs(planner_range - in_range.value) <= tolerance
    else:
        agrees = planner_agreed
    if agrees:
        assert planner_range is not None and found.ratio_variance is not None
        value = planner_range * matches.value / in_range.value
        spread = planner_range / in_range.value * math.sqrt(found.ratio_variance)
        ranged = planner_range
    else:
        value, spread, ranged = matches.value, math.sqrt(matches.variance), in_range.value
    if value <= 0:
        # No match sampled: sure only if the sample was everything.
        return Estimate(0.0, 0.0 if found.fraction >= 1 else math.inf, ranged, agrees)
    return Estimate(value, spread / value, ranged, agrees)


@dataclass(frozen=True)
class Step:
    action: Literal["done", "sample", "count"]
    fraction: float = 0.0


def next_step(found: Tally, guess: Estimate, ceiling: float, limits: Limits) -> Step:
    """After a first sample and its estimate: that is the answer, or a larger sample of
    ``fraction`` (at most ``ceiling``), or an exact count."""
    if guess.error <= limits.target_error:
        return Step("done")
    if guess.in_range <= limits.count_below_rows:
        return Step("count")
    wanted = found.fraction * GROWTH_MARGIN * (guess.error / limits.target_error) ** 2
    affordable = limits.max_sample_rows / max(found.readable, 1.0)
    fraction = min(wanted, ceiling, affordable)
    if fraction * found.readable >= COUNT_ABOVE_SHARE * guess.in_range:
        return Step("count")
    if fraction <= found.fraction:
        return Step("done")
    return Step("sample", fraction)
