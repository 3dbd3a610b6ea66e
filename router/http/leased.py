"""A streaming answer bound to its token's lease (router/auth/leases.py): when the lease ends,
the stream stops where it is (a send its client is slow to take included), its last words
name the reason (an SSE event, or the error body as the last line), and the answer ends.
Whatever its client does, nothing of the stream is produced after that."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import orjson
from starlette.responses import Response, StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from router.auth.leases import Lease, unless

log = logging.getLogger(__name__)

# How long the last words may wait for a client that is not reading: then the connection is
# closed without them.
GOODBYE_S = 1.0
LastWords = Callable[[Lease], bytes]


class LeasedResponse(Response):
    def __init__(self, inner: StreamingResponse, lease: Lease, last_words: LastWords) -> None:
        # The inner answer's status and headers are sent by the inner answer itself.
        self.status_code = inner.status_code
        self.background = None
        self.raw_headers = inner.raw_headers
        self._inner = inner
        self._lease = lease
        self._last_words = last_words

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._run(scope, receive, send)
        finally:
            self._lease.close()
        if self.background is not None:
            await self.background()

    async def _run(self, scope: Scope, receive: Receive, send: Send) -> None:
        begun = asyncio.Event()
        finished = False

        async def relay(message: Message) -> None:
            nonlocal finished
            if message["type"] == "http.response.body":
                # The inner answer's generator has started: closing it now runs its cleanup.
                begun.set()
                finished = not message.get("more_body", False)
            await send(message)

        streaming = asyncio.ensure_future(self._inner(scope, receive, relay))
        try:
            if await unless(streaming, self._lapsed(begun)):
                streaming.result()
                return
        finally:
            if streaming.cancelled():
                await self._close_body()
        # Counted as ended now: the last words may wait for a client that is not reading.
        self._lease.close()
        if finished:
            return
        log.info("stream ended: %s", self._lease.message)
        with contextlib.suppress(TimeoutError, OSError):
            async with asyncio.timeout(GOODBYE_S):
                last = self._last_words(self._lease)
                await send({"type": "http.response.body", "body": last, "more_body": True})
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _lapsed(self, begun: asyncio.Event) -> None:
        await begun.wait()
        await self._lease.ended.wait()

    async def _close_body(self) -> None:
        """The inner answer's generator, closed now (its shard cursors, its subscription)."""
        aclose = getattr(self._inner.body_iterator, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()


def error_line(lease: Lease) -> bytes:
    """The last line of an NDJSON or CSV stream: the error body, as a failing shard's."""
    return orjson.dumps(lease.error().body()) + b"\n"


def error_event(lease: Lease) -> bytes:
    """The last event of a Server-Sent Events stream."""
    return b"event: unauthorized\ndata: " + orjson.dumps(lease.error().body()) + b"\n\n"
