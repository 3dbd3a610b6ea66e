"""Dependencies shared by routes, as Annotated aliases."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Header, Request

from router.errors import Unauthorized
from router.runtime import Runtime


async def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


async def require_admin(
    runtime: RuntimeDep, authorization: Annotated[str | None, Header()] = None
) -> None:
    token = runtime.settings.server.admin_token
    if token is None:
        return
    scheme, _, presented = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        presented.strip().encode(), token.encode()
    ):
        raise Unauthorized(
            "admin endpoints need 'Authorization: Bearer <admin token>'",
            "authorization",
        )
