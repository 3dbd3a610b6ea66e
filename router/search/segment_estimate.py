"""count=estimate over compacted owner-days, the pure part: what the opened segments say about
the others (docs/architecture.md, "Compacted days": estimates).

A segment can hold a match only when it overlaps the window and no substring pattern's
trigrams rule it out (the filter never says "no" wrongly): those are the **candidates**. When
the condition is the window alone, a segment wholly inside the window counts by its ``rows``
without being opened, as count=exact does. A shard's statement (router/search/segment_sql.py)
opens every candidate when they hold few rows (the answer is exact), otherwise an evenly spaced
share of each owner-day's candidates (by ``seq``, deterministic), and counts their matches.
Here each owner-day's matches per opened row are extrapolated over its unopened candidates'
rows. The answer carries bounds that hold by construction: at least the matches counted, at
most those plus every row of the unopened candidates.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

METHOD = "segments"


@dataclass(frozen=True)
class OwnerDaySample:
    """One compacted owner-day's answer to a sample: the matches counted (its late heap rows,
    its segments counted by ``rows``, its opened segments), those of its opened segments alone,
    and the rows of its opened and unopened candidate segments."""

    counted: int
    hits: int
    opened_rows: int
    unopened_rows: int


@dataclass(frozen=True)
class SegmentCount:
    value: int
    low: int
    high: int

    @property
    def exact(self) -> bool:
        return self.low == self.high

    @classmethod
    def counted(cls, value: int) -> SegmentCount:
        return cls(value, value, value)


def extrapolate(samples: Iterable[OwnerDaySample]) -> SegmentCount:
    """The matches counted plus, per owner-day, its opened segments' matches per row times its
    unopened candidates' rows; within [counted, counted + unopened rows], since an opened
    segment cannot match more rows than it holds."""
    low = unopened = 0
    guessed = 0.0
    for sample in samples:
        low += sample.counted
        unopened += sample.unopened_rows
        if sample.opened_rows:
            guessed += sample.hits * sample.unopened_rows / sample.opened_rows
    high = low + unopened
    return SegmentCount(min(max(round(low + guessed), low), high), low, high)


def answer(heap: tuple[int, str] | None, segments: SegmentCount, failed: bool) -> dict[str, Any]:
    """The count object of an estimate whose compacted owner-days gave ``segments`` and whose
    heap day tables (if any) gave (value, method). ``bounds`` only when they hold for the
    whole answer: every shard answered and the heap part, if any, was counted."""
    heap_value, heap_method = heap if heap is not None else (0, None)
    heap_counted = heap_method in (None, "count")
    method = METHOD if heap_method is None else f"{heap_method}+{METHOD}"
    count: dict[str, Any] = {
        "value": heap_value + segments.value,
        "exact": heap_counted and segments.exact and not failed,
        "method": method,
        "bounds": None,
    }
    if heap_counted and not failed:
        count["bounds"] = [heap_value + segments.low, heap_value + segments.high]
    return count


def counted(value: int, failed: bool) -> dict[str, Any]:
    """The count object of rows counted one by one."""
    return {"value": value, "exact": not failed, "method": "count", "bounds": None}


def added(first: dict[str, Any], second: dict[str, Any], failed: bool) -> dict[str, Any]:
    """Two count objects of disjoint rows as one (an owner-day's own tables' and its shared
    rows'): the values added, exact when both are, the methods of both (a count adds no
    name to another method), bounds when both parts are bounded (an exact part by its value)."""
    methods = first["method"].split("+")
    methods += [m for m in second["method"].split("+") if m != "count" and m not in methods]

    def bounds_of(count: dict[str, Any]) -> list[int] | None:
        bounds: list[int] | None = count["bounds"]
        if bounds is None and count["exact"]:
            return [count["value"], count["value"]]
        return bounds

    one, other = bounds_of(first), bounds_of(second)
    named = first["bounds"] is not None or second["bounds"] is not None
    bounded = None
    if named and not failed and one is not None and other is not None:
        bounded = [one[0] + other[0], one[1] + other[1]]
    return {
        "value": first["value"] + second["value"],
        "exact": first["exact"] and second["exact"] and not failed,
        "method": "+".join(methods),
        "bounds": bounded,
    }
