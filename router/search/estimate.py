"""count=estimate, the pure part: what a sample says, and what to do after it.

A search with no pattern or flow filter is estimated by the planner (the time column's
histogram). Otherwise the range is sampled and all conditions are evaluated together on the
sample, so patterns or filters that go together are counted as they occur together, which
the planner cannot do (it multiplies their selectivities):

- audit: TABLESAMPLE SYSTEM of a fraction of each day table's pages; a table's matches are
  scaled by its pages over the pages the sample read;
- flows: 1 ... 16 of the 256 classes of the sample index (router/db/ddl.py), read without
  touching the table; matches are scaled by 256 over the classes read. Pages would not do:
  the merge writes a batch sorted by source, so a page holds few sources.

The relative standard error is about 1/sqrt(matches in the sample): a first sample holding
``target_hits`` matches is the answer. Fewer matches mean a rare condition: one larger sample
aims at the target within ``max_sample_rows``, and the rows are counted instead when the
range holds few rows or the sample would read half as many rows as the count.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from router.db.ddl import FLOW_SAMPLE_CLASSES, FLOW_SAMPLE_STRIDE
from router.settings import SearchSettings

# A sample that reads this share of the rows a count would read (those in the range) costs
# about what the count does: the count is made instead. Sampled pages outside the range cost
# little each, but a narrow range of a large table is cheaper to count than to sample.
COUNT_ABOVE_SHARE = 0.5
# The second sample aims a little past the target, as its matches are themselves a guess.
GROWTH_MARGIN = 1.25
# Audit samples draw at least this many pages of each day table (all of a smaller one), so
# that a small table is not left out of the sample by chance.
MIN_PAGES = 16
FLOW_FRACTIONS = (1 / FLOW_SAMPLE_CLASSES, FLOW_SAMPLE_STRIDE / FLOW_SAMPLE_CLASSES)


@dataclass(frozen=True)
class Limits:
    first_fraction: float
    target_hits: int
    max_sample_rows: int
    count_below_rows: int

    @classmethod
    def of(cls, settings: SearchSettings) -> Limits:
        return cls(
            settings.estimate_sample_fraction,
            settings.estimate_target_hits,
            settings.estimate_max_sample_rows,
            settings.estimate_count_below_rows,
        )


@dataclass(frozen=True)
class Part:
    """One day table's sample: rows matching, rows in the range and rows read, and how many
    of the table's rows each sampled row stands for."""

    hits: int
    in_range: int
    read: int
    weight: float


def audit_part(
    pages: int, percent: float, hits: int, in_range: int, read: int, pages_read: int
) -> Part:
    if percent >= 100:
        weight = 1.0
    elif pages_read == 0:
        weight = 0.0  # no page drawn: nothing read, nothing to scale
    else:
        weight = pages / pages_read
    return Part(hits, in_range, read, weight)


def flow_classes(fraction: float) -> int:
    """The number of sample classes that reads at least ``fraction`` of the rows (1 to 16)."""
    wanted = math.ceil(fraction * FLOW_SAMPLE_CLASSES - 1e-9)
    return min(max(wanted, 1), FLOW_SAMPLE_STRIDE)


def flow_part(hits: int, in_range: int, classes: int) -> Part:
    # The index holds rows of the range only: what it reads is what is in range.
    return Part(hits, in_range, in_range, FLOW_SAMPLE_CLASSES / classes)


@dataclass(frozen=True)
class Tally:
    hits: int
    read: int
    value: float  # the estimate: matching rows
    in_range: float  # rows in the range
    readable: float  # rows the sample would read at fraction 1

    @property
    def fraction(self) -> float:
        """The share of the readable rows this sample read."""
        return self.read / self.readable if self.readable else 1.0


def tally(parts: Iterable[Part]) -> Tally:
    hits = read = 0
    value = in_range = readable = 0.0
    for part in parts:
        hits += part.hits
        read += part.read
        value += part.hits * part.weight
        in_range += part.in_range * part.weight
        readable += part.read * part.weight
    return Tally(hits, read, value, in_range, readable)


@dataclass(frozen=True)
class Step:
    action: Literal["done", "sample", "count"]
    fraction: float = 0.0


def next_step(found: Tally, ceiling: float, limits: Limits) -> Step:
    """After a first sample: it is the answer, or a larger sample of ``fraction`` (at most
    ``ceiling``), or an exact count."""
    if found.hits >= limits.target_hits:
        return Step("done")
    if found.in_range <= limits.count_below_rows:
        return Step("count")
    wanted = found.fraction * GROWTH_MARGIN * limits.target_hits / max(found.hits, 1)
    affordable = limits.max_sample_rows / max(found.readable, 1.0)
    fraction = min(wanted, ceiling, affordable)
    if fraction * found.readable >= COUNT_ABOVE_SHARE * found.in_range:
        return Step("count")
    if fraction <= found.fraction:
        return Step("done")
    return Step("sample", fraction)
