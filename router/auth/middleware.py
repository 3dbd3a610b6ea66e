"""Authentication before anything else of a /v1 request (or a log shipper's push): an ASGI
middleware answers 401 before the body is read (FastAPI parses a JSON body before it solves a
route's dependencies, so a dependency alone would read an anonymous body first), and hands the
caller on in the request's state. What the caller may do is the route's dependency's to decide
(router/auth/dependency.py); a guarded route that forgot to declare one still needs a valid
token."""

from __future__ import annotations

from collections.abc import Callable

from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from router.auth.registry import Caller, TokenRegistry
from router.errors import ShardlogError, Unauthorized

# The API's own paths, and the log shippers' (Loki push; Elasticsearch _bulk, with or without
# an index in front, and the handshakes Elasticsearch clients make first): each needs a token.
GUARDED_PREFIXES = ("/v1/", "/loki/")
GUARDED_SUFFIX = "/_bulk"
GUARDED_PATHS = frozenset({"/", "/_cat/health"})
CALLER = "shardlog_caller"


def _render(_path: str, exc: ShardlogError) -> Response:
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers())


class Authenticate:
    """``render``: the 401 as the path's protocol words its errors (router.app)."""

    def __init__(
        self, app: ASGIApp, render: Callable[[str, ShardlogError], Response] = _render
    ) -> None:
        self.app = app
        self.render = render

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not guarded(scope["path"]):
            await self.app(scope, receive, send)
            return
        registry: TokenRegistry = scope["app"].state.runtime.auth
        try:
            caller = registry.authenticate(_authorization(scope))
        except Unauthorized as exc:
            answer = self.render(scope["path"], exc)
            await answer(scope, receive, send)
            return
        scope.setdefault("state", {})[CALLER] = caller
        await self.app(scope, receive, send)


def guarded(path: str) -> bool:
    return (
        path.startswith(GUARDED_PREFIXES) or path.endswith(GUARDED_SUFFIX) or path in GUARDED_PATHS
    )


def _authorization(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            return str(value.decode("latin-1"))
    return None


def caller_of(scope: Scope) -> Caller | None:
    """The caller the middleware authenticated, if it saw the request."""
    state = scope.get("state")
    return None if state is None else state.get(CALLER)
