"""The grid's cells (pgbench-tools' clients x scale, here clients x rows per request): each
cell's runs of audit writes through the router, reduced to tps, rows/s and the latency of a
request (average, p90, max)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

import httpx

from bench import traffic


@dataclass(frozen=True)
class Cell:
    clients: int
    rows: int

    @property
    def label(self) -> str:
        return f"{self.clients} clients x {self.rows} rows"


def cells(clients: list[int], rows: list[int]) -> list[Cell]:
    return [Cell(c, r) for r in rows for c in clients]


def percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency_ms(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        "avg_ms": round(1000 * statistics.fmean(ordered), 2),
        "p50_ms": round(1000 * percentile(ordered, 0.5), 2),
        "p90_ms": round(1000 * percentile(ordered, 0.9), 2),
        "max_ms": round(1000 * ordered[-1], 2),
        "requests": len(ordered),
    }


def summary(cell: Cell, runs: list[list[float]], seconds: float) -> dict[str, Any]:
    """Median tps and rows/s over the runs; latency over every request of every run."""
    tps = [len(run) / seconds for run in runs]
    return {
        "clients": cell.clients,
        "rows_per_request": cell.rows,
        "tps": round(statistics.median(tps), 1),
        "rows_per_s": round(statistics.median(tps) * cell.rows),
        "tps_runs": [round(t, 1) for t in tps],
        **latency_ms([latency for run in runs for latency in run]),
    }


async def measure(
    http: httpx.AsyncClient, cell: Cell, owners: list[str], runs: int, seconds: float
) -> dict[str, Any]:
    write = traffic.writer(owners, cell.rows)
    samples = [
        await traffic.send_for(http, write, seconds, cell.clients, f"{cell.label}, run {n + 1}")
        for n in range(runs)
    ]
    return summary(cell, samples, seconds)
