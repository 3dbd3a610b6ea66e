"""The body of a report in JSON: its header (what it grouped and computed, how exact each
number is, which shards are missing) and its groups. NDJSON and CSV carry the groups alone,
the header's partial/failed_shards in response headers."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from router.models.common import Out
from router.models.search import FailedShard


class MetricExactness(Out):
    exact: bool
    method: str | None = None
    relative_standard_error: float | None = Field(
        None, description="Of an approximate distinct count: 1.04 / sqrt(registers)"
    )


class OrderExactness(Out):
    exact: bool
    method: str


class Exactness(Out):
    metrics: dict[str, MetricExactness]
    order: OrderExactness | None


class Report(Out):
    group_by: list[str]
    metrics: list[str]
    exactness: Exactness
    partial: bool = Field(description="true: failed_shards did not answer, their rows are missing")
    failed_shards: list[FailedShard]
    groups: list[dict[str, Any]] = Field(
        description="One object per group: its group_by keys and its metrics by name"
    )
    spilled_runs: int = Field(
        description="Sorted runs written to disk past SHARDLOG_REPORT__MEMORY_BUDGET_BYTES"
    )
