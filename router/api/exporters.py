"""Admin API of flow exporters: which switch (and tenant) the collector writes an exporter's
flows under. Changes go through catalog.exporters and reach the collector through the catalog
version NOTIFY. Like every admin route, it needs the admin scope, which only tokens of the
system tenant hold: they reach every tenant's mappings."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query

from router.api.deps import RuntimeDep, TenantFilter, admin_router
from router.api.responses import errors
from router.auth.dependency import Admin
from router.catalog import exporters
from router.errors import NotFound
from router.models.exporters import DOMAIN_DESCRIPTION, Exporter, ExporterIn

router = admin_router()
Address = Annotated[
    str,
    Path(
        max_length=exporters.MAX_ADDRESS_CHARS,
        description="The exporter's IP address (192.0.2.1, 2001:db8::1); an IPv4-mapped IPv6 "
        "address is its IPv4 address",
    ),
]


@router.get(
    "/exporters", summary="Flow exporters and their switches", response_model=list[Exporter]
)
async def list_exporters(
    runtime: RuntimeDep,
    tenant: TenantFilter = None,
) -> list[dict[str, Any]]:
    found = await exporters.list_exporters(runtime.metadata, tenant)
    return [exporters.exporter_json(m) for m in found]


@router.put(
    "/exporters/{address}",
    summary="Map a flow exporter (one of its domains, or all) to a switch",
    response_model=Exporter,
    responses=errors(400, 404, 409),
)
async def set_exporter(
    address: Address, body: ExporterIn, caller: Admin, runtime: RuntimeDep
) -> dict[str, Any]:
    tenant = caller.grant.tenant if body.tenant is None else body.tenant
    mapping = await exporters.set_exporter(
        runtime.metadata, address, body.domain, body.switch, tenant
    )
    await runtime.self_audit.record(
        caller.actor,
        "exporter.set",
        exporters.describe(mapping.address, mapping.domain),
        switch=mapping.switch,
        tenant=mapping.tenant,
        token_id=caller.token_id,
    )
    return exporters.exporter_json(mapping)


@router.delete(
    "/exporters/{address}",
    status_code=204,
    summary="Remove a flow exporter's mapping",
    responses=errors(404),
)
async def remove_exporter(
    address: Address,
    caller: Admin,
    runtime: RuntimeDep,
    domain: Annotated[
        int | None, Query(ge=0, le=exporters.MAX_DOMAIN, description=DOMAIN_DESCRIPTION)
    ] = None,
) -> None:
    canonical = exporters.host_address(address)
    if not await exporters.remove_exporter(runtime.metadata, canonical, domain):
        raise NotFound(f"exporter {exporters.describe(canonical, domain)} is not mapped", "address")
    await runtime.self_audit.record(
        caller.actor,
        "exporter.remove",
        exporters.describe(canonical, domain),
        token_id=caller.token_id,
    )
