"""The rows of bench/compaction and how they are written: a closed UTC day of loghub's real
lines (bench/storage/corpus), ``copies`` times over with owners of their own (16 systems a
copy, each line once per owner, timestamps drawn anew per copy), posted as NDJSON to the
router's /v1/audit; the CPU of the processes that did the work, read around each phase."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import date
from typing import Any

import orjson

from bench.harness import send
from bench.storage import corpus
from bench.storage.corpus import Row
from bench.storage.rest_ingest import cpu_of, postgres_pids

BODY_ROWS = 10_000


def day_rows(day: date, copies: int, per_owner: int, prefix: str) -> list[Row]:
    """``copies`` x 16 owners (``prefix``c<copy>-<system>) of ``per_owner`` real lines each,
    over ``day``; the same ``day``, ``copies`` and ``per_owner`` give the same rows."""
    rows = []
    for copy in range(copies):
        for row in corpus.real_rows(day, per_owner, seed=37 + copy):
            rows.append(Row(f"{prefix}c{copy}-{row.owner}", row.ts, row.content))
    return rows


def bodies(rows: list[Row], body_rows: int = BODY_ROWS) -> list[bytes]:
    records = [
        orjson.dumps({"owner": r.owner, "ts": r.ts.isoformat(), "content": r.content}) for r in rows
    ]
    return [
        b"\n".join(records[start : start + body_rows]) + b"\n"
        for start in range(0, len(records), body_rows)
    ]


@dataclass
class Spent:
    """Elapsed and CPU seconds of a phase over ``rows`` rows: of PostgreSQL (every process of
    the cluster) and of the one process that drove it (the router, or the compacting one)."""

    rows: int
    seconds: float
    driver_cpu_s: float
    postgres_cpu_s: float

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds

    @property
    def rows_per_cpu_s(self) -> float:
        return self.rows / (self.driver_cpu_s + self.postgres_cpu_s)

    def summary(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "seconds": round(self.seconds, 3),
            "rows_per_s": round(self.rows_per_s),
            "rows_per_cpu_s": round(self.rows_per_cpu_s),
            "driver_us_per_row": round(self.driver_cpu_s / self.rows * 1e6, 2),
            "postgres_us_per_row": round(self.postgres_cpu_s / self.rows * 1e6, 2),
        }


class CpuWatch:
    """CPU seconds of ``driver`` and of the cluster's PostgreSQL processes since it started
    (processes started meanwhile counted from zero)."""

    def __init__(self, cluster: Any, driver: int) -> None:
        self._cluster = cluster
        self._driver = driver
        self._before = self._now()
        self._started = time.perf_counter()

    def _now(self) -> dict[int, float]:
        return cpu_of(postgres_pids(self._cluster) | {self._driver})

    def spent(self, rows: int) -> Spent:
        seconds = time.perf_counter() - self._started
        after = self._now()
        used = {pid: s - self._before.get(pid, 0.0) for pid, s in after.items()}
        driver = used.pop(self._driver, 0.0)
        return Spent(rows, seconds, driver, sum(used.values()))


def ingest(url: str, router_pid: int, cluster: Any, rows: list[Row], clients: int) -> Spent:
    """``rows`` posted by ``clients`` concurrent clients in BODY_ROWS-row bodies: elapsed
    time and the CPU of the router and PostgreSQL."""
    prepared = bodies(rows)
    watch = CpuWatch(cluster, router_pid)
    asyncio.run(send(url, "/v1/audit", prepared, clients))
    return watch.spent(len(rows))
