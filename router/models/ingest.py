"""Bodies of the write API. The record streams are parsed by router.ingest (a stream cannot be
a model); AuditRecord and FlowRecord describe one record for the OpenAPI schema and follow the
rules of router.ingest.records."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from router.ingest.records import MAX_BIGINT, MAX_INTEGER
from router.models.common import Day, IpAddress, JsonInt, Out, OwnerKey

TS_DESCRIPTION = (
    "RFC 3339 with a UTC offset (Z or ±hh:mm); default: now. At most "
    "SHARDLOG_INGEST__FUTURE_SKEW_S ahead, not older than the owner's retention"
)


class AuditRecord(BaseModel):
    """One audit record; unknown fields are refused."""

    model_config = ConfigDict(extra="forbid")

    owner: str = Field(
        min_length=1,
        max_length=256,
        description="1-256 characters (SHARDLOG_INGEST__MAX_OWNER_CHARS) of UTF-8 without "
        "control or unprintable characters",
    )
    ts: AwareDatetime | None = Field(None, description=TS_DESCRIPTION)
    content: str = Field(
        description="At most SHARDLOG_INGEST__MAX_CONTENT_BYTES UTF-8 bytes, no NUL"
    )
    attrs: dict[str, Any] | None = Field(
        None, description="At most SHARDLOG_INGEST__MAX_ATTRS_BYTES bytes as JSON, no NUL"
    )


class FlowRecord(BaseModel):
    """One flow record; unknown fields are refused. Records of one (switch, UTC day,
    5-tuple) merge: bytes and packets add."""

    model_config = ConfigDict(extra="forbid")

    switch: str = Field(min_length=1, max_length=256, description="Like an audit owner")
    ts: AwareDatetime | None = Field(None, description=TS_DESCRIPTION)
    src_ip: IpAddress = Field(description="IPv4 or IPv6 host address, any valid textual form")
    dst_ip: IpAddress = Field(description="Of the same family as src_ip")
    src_port: int = Field(ge=0, le=65535)
    dst_port: int = Field(ge=0, le=65535)
    ip_version: Literal[4, 6] | None = Field(
        None, description="Derived from the addresses; must agree when given"
    )
    proto: int | None = Field(None, ge=0, le=255)
    bytes: int = Field(ge=0, le=MAX_BIGINT)
    packets: int = Field(0, ge=0, le=MAX_BIGINT)
    tcp_flags: int | None = Field(
        None, ge=0, le=255, description="The TCP flags seen (OR-ed); merged records OR theirs"
    )
    sampling_rate: int | None = Field(
        None,
        ge=1,
        le=MAX_INTEGER,
        description="One in how many packets were sampled (1: unsampled). bytes and packets "
        "are taken as already scaled up by it: they are stored as given",
    )


class FlowKeyIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    src_ip: IpAddress
    dst_ip: IpAddress = Field(description="Of the same family as src_ip")
    src_port: JsonInt = Field(ge=0, le=65535)
    dst_port: JsonInt = Field(ge=0, le=65535)
    proto: JsonInt | None = Field(None, ge=0, le=255)


class FlowDeleteIn(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, strict=True)

    switch: OwnerKey
    from_day: Day = Field(alias="from", description="First day (UTC) to delete from")
    to_day: Day = Field(alias="to", description="Last day (UTC), inclusive")
    flows: list[FlowKeyIn] = Field(min_length=1, max_length=100_000)


class Accepted(Out):
    accepted: int = Field(ge=0, description="Records (or CSV rows) written")


class Removed(Out):
    removed: int = Field(ge=0, description="Stored flows removed")
