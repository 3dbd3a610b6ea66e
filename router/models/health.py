"""Bodies of the health endpoints."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from router.catalog.snapshot import ShardState
from router.models.common import Out
from router.models.errors import ErrorDetail


class Live(Out):
    status: Literal["live"]


class MetadataProbe(Out):
    reachable: bool
    error: str | None


class ShardProbe(Out):
    name: str
    group: str
    state: ShardState
    reachable: bool | None = Field(description="null: the shard is marked down, not probed")
    latency_ms: float | None
    error: str | None


class Readiness(Out):
    status: Literal["ready", "unready"]
    catalog_version: int
    metadata: MetadataProbe
    shards: list[ShardProbe]
    unreachable: list[str] = Field(description="Shards that did not answer the probe")


class Unready(Readiness):
    """The readiness report with the error body's `error` beside it."""

    error: ErrorDetail
