"""Bodies of the flow exporters admin API (router/api/exporters.py)."""

from __future__ import annotations

from pydantic import Field

from router.catalog.exporters import MAX_DOMAIN
from router.catalog.rules import NAME_PATTERN
from router.models.admin import Body
from router.models.common import JsonInt, Out, OwnerKey

DOMAIN_DESCRIPTION = (
    "Observation domain (IPFIX), source id (NetFlow v9) or engine_type * 256 + engine_id (v5), "
    "0 to 4294967295; null: every domain of the address without a mapping of its own"
)


class ExporterIn(Body):
    switch: OwnerKey
    domain: JsonInt | None = Field(None, ge=0, le=MAX_DOMAIN, description=DOMAIN_DESCRIPTION)
    tenant: str | None = Field(
        None,
        pattern=NAME_PATTERN.pattern,
        description="The tenant the switch belongs to; null: the caller's",
    )


class Exporter(Out):
    address: str = Field(description="The exporter's IP address, in its one spelling")
    domain: int | None = Field(description=DOMAIN_DESCRIPTION)
    switch: str = Field(description="The switch key its flows are written under")
    tenant: str
