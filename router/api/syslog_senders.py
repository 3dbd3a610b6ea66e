"""Admin API of syslog senders: which tenant the syslog listener writes a sender's messages as.
Changes go through catalog.syslog_senders and reach the listener through the catalog version
NOTIFY. Like every admin route, it needs the admin scope, which only tokens of the system
tenant hold: they reach every tenant's mappings. A sender is a path of its own: a network
keeps its slash (``/v1/admin/syslog-senders/192.0.2.0/24``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path

from router.api.deps import RuntimeDep, TenantFilter, admin_router
from router.api.responses import errors
from router.auth.dependency import Admin
from router.catalog import syslog_senders
from router.errors import NotFound
from router.models.syslog_senders import SENDER_DESCRIPTION, SyslogSender, SyslogSenderIn

router = admin_router()
Sender = Annotated[
    str, Path(max_length=syslog_senders.MAX_SENDER_CHARS, description=SENDER_DESCRIPTION)
]


@router.get(
    "/syslog-senders",
    summary="Syslog senders and the tenants their messages are written as",
    response_model=list[SyslogSender],
)
async def list_senders(runtime: RuntimeDep, tenant: TenantFilter = None) -> list[dict[str, Any]]:
    found = await syslog_senders.list_senders(runtime.metadata, tenant)
    return [syslog_senders.sender_json(m) for m in found]


@router.put(
    "/syslog-senders/{sender:path}",
    summary="Map a syslog sender (a network or a client certificate) to a tenant",
    response_model=SyslogSender,
    responses=errors(400, 404),
)
async def set_sender(
    sender: Sender, body: SyslogSenderIn, caller: Admin, runtime: RuntimeDep
) -> dict[str, Any]:
    tenant = caller.grant.tenant if body.tenant is None else body.tenant
    mapping = await syslog_senders.set_sender(runtime.metadata, sender, tenant)
    await runtime.self_audit.record(
        caller.actor,
        "syslog_sender.set",
        mapping.sender,
        tenant=mapping.tenant,
        token_id=caller.token_id,
    )
    return syslog_senders.sender_json(mapping)


@router.delete(
    "/syslog-senders/{sender:path}",
    status_code=204,
    summary="Remove a syslog sender's mapping",
    responses=errors(404),
)
async def remove_sender(sender: Sender, caller: Admin, runtime: RuntimeDep) -> None:
    canonical = syslog_senders.canonical_sender(sender)
    if not await syslog_senders.remove_sender(runtime.metadata, canonical):
        raise NotFound(f"syslog sender {canonical} is not mapped", "sender")
    await runtime.self_audit.record(
        caller.actor, "syslog_sender.remove", canonical, token_id=caller.token_id
    )
