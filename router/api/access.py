"""Admin API of tenants and tokens. A token's text is in the answer that creates it and
nowhere else. Changes reach every router through the catalog version NOTIFY; this router
reloads at once, so a revocation answered here already holds here."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query

from router import clock
from router.api.deps import RuntimeDep, TenantFilter, admin_router
from router.api.responses import errors
from router.auth import store
from router.auth.dependency import Admin
from router.auth.tokens import ID_PATTERN
from router.catalog import rules
from router.errors import Invalid, NotFound
from router.models.auth import NewToken, Tenant, TenantIn, Token, TokenIn
from router.timestamps import TimestampError, parse_rfc3339

router = admin_router()
TenantPath = Annotated[
    str,
    Path(
        pattern=rules.NAME_PATTERN.pattern,
        description="1-63 characters: lowercase letters, digits, '_' or '-', starting with "
        "a letter",
    ),
]
TokenId = Annotated[str, Path(pattern=ID_PATTERN.pattern, description="16 hex digits")]


@router.get(
    "/tenants", summary="Tenants with their key and token counts", response_model=list[Tenant]
)
async def list_tenants(runtime: RuntimeDep) -> list[dict[str, Any]]:
    return [t.to_json() for t in await store.list_tenants(runtime.metadata)]


@router.post(
    "/tenants",
    status_code=201,
    summary="Add a tenant",
    response_model=Tenant,
    responses=errors(400, 409),
)
async def add_tenant(body: TenantIn, caller: Admin, runtime: RuntimeDep) -> dict[str, Any]:
    tenant = await store.add_tenant(runtime.metadata, body.name, body.description)
    await runtime.catalog.reload()
    await runtime.self_audit.record(
        caller.actor, "tenant.add", tenant.name, token_id=caller.token_id
    )
    return tenant.to_json()


Force = Annotated[
    bool,
    Query(
        description="also remove what the refusal names (a tenant's tokens and exporter "
        "mappings; the last usable admin token)"
    ),
]


@router.delete(
    "/tenants/{name}",
    status_code=204,
    summary="Remove a tenant that owns no keys (its tokens and exporter mappings: with force)",
    responses=errors(404, 409),
)
async def remove_tenant(
    name: TenantPath, caller: Admin, runtime: RuntimeDep, force: Force = False
) -> None:
    removed = await store.remove_tenant(runtime.metadata, name, force=force)
    await runtime.catalog.reload()
    await runtime.self_audit.record(
        caller.actor,
        "tenant.remove",
        name,
        tokens=removed.tokens,
        exporters=removed.exporters,
        syslog_senders=removed.senders,
        token_id=caller.token_id,
    )


@router.post(
    "/tokens",
    status_code=201,
    summary="Create a token (its text is in this answer only)",
    response_model=NewToken,
    responses=errors(400, 404),
)
async def create_token(body: TokenIn, caller: Admin, runtime: RuntimeDep) -> dict[str, Any]:
    expires_at = None
    if body.expires_at is not None:
        try:
            expires_at = parse_rfc3339(body.expires_at)
        except TimestampError as exc:
            raise Invalid(f"expires_at {exc}", "expires_at") from None
    store.check_expiry(expires_at, clock.now())
    limits = store.TokenLimits(
        body.limits.rate_per_s, body.limits.ingest_bytes_per_s, body.limits.max_searches
    )
    record, text = await store.create_token(
        runtime.metadata,
        body.tenant,
        body.name,
        body.scopes,
        caller.actor,
        expires_at=expires_at,
        limits=limits,
    )
    await runtime.catalog.reload()
    await runtime.self_audit.record(
        caller.actor,
        "token.create",
        record.id,
        tenant=record.tenant,
        name=record.name,
        scopes=list(record.scopes),
        expires_at=None if record.expires_at is None else record.expires_at.isoformat(),
        token_id=caller.token_id,
    )
    return {**record.to_json(), "token": text}


@router.get("/tokens", summary="Tokens (never their secrets)", response_model=list[Token])
async def list_tokens(
    runtime: RuntimeDep,
    tenant: TenantFilter = None,
) -> list[dict[str, Any]]:
    now = clock.now()
    return [t.to_json(now) for t in await store.list_tokens(runtime.metadata, tenant)]


@router.delete(
    "/tokens/{token_id}",
    summary="Revoke a token: refused by every router within a second (the last usable admin "
    "token: only with force)",
    response_model=Token,
    responses=errors(404, 409),
)
async def revoke_token(
    token_id: TokenId, caller: Admin, runtime: RuntimeDep, force: Force = False
) -> dict[str, Any]:
    record = await store.revoke_token(runtime.metadata, token_id, force=force)
    await runtime.catalog.reload()
    await runtime.self_audit.record(
        caller.actor,
        "token.revoke",
        record.id,
        tenant=record.tenant,
        name=record.name,
        token_id=caller.token_id,
    )
    return record.to_json()


@router.get(
    "/tokens/{token_id}",
    summary="One token (never its secret)",
    response_model=Token,
    responses=errors(404),
)
async def get_token(token_id: TokenId, runtime: RuntimeDep) -> dict[str, Any]:
    record = await store.get_token(runtime.metadata, token_id)
    if record is None:
        raise NotFound(f"token {token_id} does not exist", "token_id")
    return record.to_json()
