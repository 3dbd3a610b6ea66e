"""Dependencies shared by routes, as Annotated aliases, and the router every /v1/admin module
starts from."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from router.api.responses import GUARDED, errors
from router.auth import dependency
from router.catalog.rules import NAME_PATTERN
from router.runtime import Runtime


async def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
# A listing narrowed to one tenant (?tenant=).
TenantFilter = Annotated[
    str | None, Query(pattern=NAME_PATTERN.pattern, description="Only this tenant's")
]


def admin_router() -> APIRouter:
    """Routes under /v1/admin. Every one: 401 without a valid token, 403 without the admin
    scope, 429 past the token's rate, 422 for a malformed parameter or body."""
    return APIRouter(
        prefix="/v1/admin",
        tags=["admin"],
        dependencies=[Depends(dependency.admin)],
        responses=errors(422, *GUARDED),
    )
