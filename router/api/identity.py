"""GET /v1/whoami: the calling token's tenant, scopes and prefixes, so that a client (the
console) offers only what the token may do. Any valid token may ask, about itself only."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from router.api.responses import errors
from router.auth.dependency import AnyToken
from router.auth.scopes import SCOPES
from router.models.auth import Identity

router = APIRouter(prefix="/v1", tags=["auth"])


@router.get(
    "/whoami",
    summary="The calling token: its tenant, scopes and key prefixes",
    response_model=Identity,
    responses=errors(401, 429),
)
async def whoami(caller: AnyToken) -> dict[str, Any]:
    grant = caller.grant
    return {
        "tenant": grant.tenant,
        "token_id": caller.token_id,
        "token_name": caller.name,
        "scopes": [scope for scope in SCOPES if scope in grant.scopes],
        "owner_prefixes": list(grant.owner_prefixes),
        "switch_prefixes": list(grant.switch_prefixes),
        "any_tenant": grant.any_tenant,
    }
