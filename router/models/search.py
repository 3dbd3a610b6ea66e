"""Bodies of the read API: search pages and the lines of NDJSON exports. Timestamps are the
strings the service renders (Python's isoformat of a timestamptz, RFC 3339 with an offset)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from router.models.common import Out, Timestamp

REF = "This row's permalink: GET /v1/audit/rows/{ref} or /v1/flows/rows/{ref} answers it"


class AuditItem(Out):
    ts: Timestamp
    id: int = Field(description="Unique within its shard and day table")
    content: str
    attrs: dict[str, Any] | None
    shard: str
    owner: str
    ref: str = Field(description=REF)


class FlowItem(Out):
    """One stored flow: the merge of every record of its (switch, UTC day, 5-tuple)."""

    first_seen: Timestamp
    last_seen: Timestamp
    id: int
    src_ip: str
    dst_ip: str
    src_port: int
    dst_port: int
    ip_version: int = Field(description="4 or 6")
    proto: int | None
    bytes: int
    packets: int
    flow_count: int = Field(description="Records merged into this flow")
    tcp_flags: int | None = Field(
        description="The TCP flags of its records OR-ed (0..255); null when no record said "
        "(REST records without tcp_flags)"
    )
    sampling_rate: int | None = Field(
        description="One in how many packets its counts were sampled from (1: unsampled; the "
        "largest when records of different rates merged); null when no record said. bytes and "
        "packets are already scaled up by it"
    )
    sampled: bool = Field(description="Some record of it was sampled (sampling_rate > 1)")
    sampling_mixed: bool = Field(
        description="Records of different sampling rates merged into it: bytes and packets "
        "add counts of different precision"
    )
    shard: str
    switch: str
    ref: str = Field(description=REF)


class Count(Out):
    value: int
    exact: bool = Field(description="false: an estimate, or some shard failed")
    method: Literal[
        "count",
        "sample",
        "planner",
        "segments",
        "count+segments",
        "sample+segments",
        "planner+segments",
    ] = Field(
        description="count: the rows were counted; sample: matches in a sample of the range, "
        "scaled; planner: the planner's row estimate (a time range alone); segments: compacted "
        "owner-days from their segments (counted, or a share of the candidates opened and "
        "scaled); X+segments: heap day tables by X, compacted ones by segments"
    )
    bounds: tuple[int, int] | None = Field(
        None,
        description="count=estimate over compacted owner-days: the true count lies within "
        "[low, high], by construction; null otherwise: no compacted day, a shard failed, or a "
        "heap part was sampled or left to the planner",
    )


class FailedShard(Out):
    shard: str
    reason: str


class Page(Out):
    items: list[Any]
    next_cursor: str | None = Field(description="Continues after the last item; null: no more")
    prev_cursor: str | None = Field(description="Goes back before the first item")
    count: Count | None = Field(description="null unless count=estimate or count=exact")
    partial: bool = Field(description="true: failed_shards did not answer, their rows are missing")
    failed_shards: list[FailedShard]


class AuditPage(Page):
    items: list[AuditItem]


class FlowPage(Page):
    items: list[FlowItem]
