"""Request count and latency by route template, and the access log, as a plain ASGI middleware:
Starlette's BaseHTTPMiddleware runs every request through extra tasks and streams, each a turn
of the event loop that a small request waits for behind a large one.

The access line leaves out the query string (uvicorn's own line, turned off, wrote it): a
search's query string carries its patterns and keys, which do not belong in a server log."""

from __future__ import annotations

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from router.metrics import Metrics

ACCESS = logging.getLogger("shardlog.access")
MAX_LOGGED_PATH_CHARS = 256


def loggable_path(path: str) -> str:
    """The path as one line of bounded length: control characters escaped, so that a path
    cannot forge a log line."""
    shown = path[:MAX_LOGGED_PATH_CHARS]
    if not shown.isprintable():
        shown = shown.encode("unicode_escape").decode("ascii")
    return shown + ("..." if len(path) > MAX_LOGGED_PATH_CHARS else "")


class ObserveRequests:
    def __init__(self, app: ASGIApp, metrics: Metrics, access_log: bool = True) -> None:
        self.app = app
        self.metrics = metrics
        self.access_log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_observed(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_observed)
        finally:
            template = getattr(scope.get("route"), "path", "unmatched")
            method = scope["method"]
            seconds = time.perf_counter() - started
            self.metrics.requests.labels(method, template, str(status)).inc()
            self.metrics.latency.labels(method, template).observe(seconds)
            if self.access_log:
                client = scope.get("client")
                ACCESS.info(
                    '%s "%s %s" %d %.1f ms',
                    client[0] if client else "-",
                    method,
                    loggable_path(scope["path"]),
                    status,
                    seconds * 1000,
                )
