"""Bodies of the write API that are small enough to be models (the record streams are not)."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, ConfigDict, Field


class FlowKeyIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    src_ip: str
    dst_ip: str
    src_port: int = Field(ge=0, le=65535)
    dst_port: int = Field(ge=0, le=65535)
    proto: int | None = Field(None, ge=0, le=255)


class FlowDeleteIn(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    switch: str = Field(min_length=1, max_length=256)
    from_day: date = Field(alias="from", description="First day (UTC) to delete from")
    to_day: date = Field(alias="to", description="Last day (UTC), inclusive")
    flows: list[FlowKeyIn] = Field(min_length=1, max_length=100_000)


class Accepted(BaseModel):
    accepted: int


class Removed(BaseModel):
    removed: int
