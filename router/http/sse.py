"""The response of a Server-Sent Events stream: frames as the stream yields them, a stream
closed when its client has not taken one write for ``stall_timeout_s`` (its rows wait in the
shards for a resume, not in the router), and the stream's generator always closed, so that its
subscription ends with the connection."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from starlette.responses import StreamingResponse
from starlette.types import Send

log = logging.getLogger(__name__)

MEDIA_TYPE = "text/event-stream"
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class StalledClient(Exception):
    pass


class EventStreamResponse(StreamingResponse):
    def __init__(
        self, frames: AsyncIterator[bytes], stall_timeout_s: float, status_code: int = 200
    ) -> None:
        super().__init__(frames, status_code, media_type=MEDIA_TYPE, headers=HEADERS)
        self._frames = frames
        self._stall_timeout_s = stall_timeout_s

    async def stream_response(self, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        try:
            async for chunk in self._frames:
                try:
                    await asyncio.wait_for(
                        send({"type": "http.response.body", "body": chunk, "more_body": True}),
                        self._stall_timeout_s,
                    )
                except TimeoutError:
                    log.info(
                        "tail stream closed: its client took no data for %g s",
                        self._stall_timeout_s,
                    )
                    return
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            aclose = getattr(self._frames, "aclose", None)
            if aclose is not None:
                await asyncio.shield(aclose())
