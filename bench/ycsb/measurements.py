"""Latencies and outcomes per operation, written in YCSB's text export layout
(TextMeasurementsExporter over its HdrHistogram measurements), so a run diffs line by line
against YCSB runs of other databases:

    [OVERALL], RunTime(ms), 10110
    [OVERALL], Throughput(ops/sec), 98.91196834817013
    [READ], Operations, 512
    [READ], AverageLatency(us), 803.1796875
    [READ], MinLatency(us), 344
    [READ], MaxLatency(us), 11223
    [READ], 95thPercentileLatency(us), 1447
    [READ], 99thPercentileLatency(us), 2691
    [READ], Return=OK, 512

Latencies are exact (kept whole, not bucketed); a percentile is the smallest latency at or
below which that share of the operations fell, as HdrHistogram reports it."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# YCSB's Status names used here: OK, a read or scan that found nothing, wrong data, a failure.
OK = "OK"
NOT_FOUND = "NOT_FOUND"
UNEXPECTED_STATE = "UNEXPECTED_STATE"
ERROR = "ERROR"
# The order operations are written in (YCSB's own order is its hash map's).
ORDER = ("READ", "UPDATE", "INSERT", "SCAN", "READ-MODIFY-WRITE")


@dataclass
class Series:
    latencies_us: list[int] = field(default_factory=list)
    returns: Counter[str] = field(default_factory=Counter)

    def add(self, latency_us: int, status: str) -> None:
        self.latencies_us.append(latency_us)
        self.returns[status] += 1

    def percentile(self, share: float) -> int:
        ordered = sorted(self.latencies_us)
        rank = max(math.ceil(share / 100 * len(ordered)), 1)
        return ordered[rank - 1]

    @property
    def average_us(self) -> float:
        return sum(self.latencies_us) / len(self.latencies_us)


@dataclass
class Measurements:
    """One phase (load, or a workload's run): its wall time and every operation's outcome."""

    percentiles: tuple[float, ...] = (95.0, 99.0)
    runtime_ms: int = 0
    operations: int = 0
    series: dict[str, Series] = field(default_factory=dict)

    def measure(self, name: str, latency_us: int, status: str) -> None:
        self.series.setdefault(name, Series()).add(latency_us, status)

    @property
    def throughput(self) -> float:
        return 1000.0 * self.operations / self.runtime_ms if self.runtime_ms else 0.0

    @property
    def failed(self) -> int:
        return sum(
            count
            for series in self.series.values()
            for status, count in series.returns.items()
            if status != OK
        )

    def names(self) -> list[str]:
        known = [name for name in ORDER if name in self.series]
        return known + sorted(name for name in self.series if name not in ORDER)

    def summary(self) -> dict[str, Any]:
        """The same figures as the text, for the JSON results."""
        operations: dict[str, Any] = {}
        for name in self.names():
            series = self.series[name]
            operations[name] = {
                "operations": len(series.latencies_us),
                "average_us": round(series.average_us, 1),
                "min_us": min(series.latencies_us),
                "max_us": max(series.latencies_us),
                **{f"p{ordinal(p)}_us": series.percentile(p) for p in self.percentiles},
                "returns": dict(series.returns),
            }
        return {
            "runtime_ms": self.runtime_ms,
            "operations": self.operations,
            "throughput_ops_s": round(self.throughput, 1),
            "failed": self.failed,
            "by_operation": operations,
        }


def ordinal(percentile: float) -> str:
    """YCSB's label of a percentile: 95 -> '95th', 1 -> '1st', 99.9 -> '99.9'."""
    if percentile % 1:
        return java_double(percentile)
    whole = int(percentile)
    if whole % 100 in (11, 12, 13):
        return f"{whole}th"
    return f"{whole}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(whole % 10, 'th') }"


def java_double(value: float) -> str:
    """Java's Double.toString: plain from 10^-3 up to 10^7, else computerized scientific."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        text = repr(float(value))
        return text if "e" not in text else f"{value:.1f}"
    mantissa, exponent = f"{value:.16e}".split("e")
    digits = repr(float(mantissa))
    return f"{digits}E{int(exponent)}"


def ycsb_text(measurements: Measurements) -> str:
    lines = [
        f"[OVERALL], RunTime(ms), {measurements.runtime_ms}",
        f"[OVERALL], Throughput(ops/sec), {java_double(measurements.throughput)}",
    ]
    for name in measurements.names():
        series = measurements.series[name]
        lines += [
            f"[{name}], Operations, {len(series.latencies_us)}",
            f"[{name}], AverageLatency(us), {java_double(series.average_us)}",
            f"[{name}], MinLatency(us), {min(series.latencies_us)}",
            f"[{name}], MaxLatency(us), {max(series.latencies_us)}",
        ]
        lines += [
            f"[{name}], {ordinal(p)}PercentileLatency(us), {series.percentile(p)}"
            for p in measurements.percentiles
        ]
        lines += [
            f"[{name}], Return={status}, {count}"
            for status, count in sorted(series.returns.items())
        ]
    return "\n".join(lines) + "\n"
