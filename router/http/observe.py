"""Request count and latency by route template, as a plain ASGI middleware: Starlette's
BaseHTTPMiddleware runs every request through extra tasks and streams, each a turn of the event
loop that a small request waits for behind a large one."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from router.metrics import Metrics


class ObserveRequests:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

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
            self.metrics.requests.labels(method, template, str(status)).inc()
            self.metrics.latency.labels(method, template).observe(time.perf_counter() - started)
