"""uvicorn's httptools protocol with deadlines for slow clients and a cap on connections.

uvicorn waits for a request's headers and body as long as the client likes, and its
``limit_concurrency`` only answers 503 once headers are complete, which a slow client never
reaches. Per connection this protocol keeps one timer, for the phase it is in:

- headers: from the connection's start, or the first byte of its next request (until then
  uvicorn's keep-alive timeout governs), until the headers are complete; late: 408, or a plain
  close when not one byte came; larger than ``max_header_bytes``: 431;
- body: the pace of :class:`router.http.pace.BodyPace`; late: 408 while the answer has not
  started (the application's next ``receive()`` is ``http.disconnect``), a plain close after;
- over ``max_connections``: a place in the room for health checks (router/http/health_room.py),
  where a health check is answered and anything else gets 503 with ``Retry-After`` once its
  headers are read; with the room full, that 503 at once, without reading the request.

Those answers are followed by a lingering close: the router sends FIN and drops what the client
still sends for up to ``LINGER_S``, since closing with unread bytes would reset the connection
and could destroy the answer before the client reads it. Time the router itself holds a client
up (reading paused for back-pressure, a client waiting for ``100 Continue``) never counts.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging
import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, cast

import orjson
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.server import ServerState

from router.errors import error_body
from router.http.health_room import HealthRoom, is_health_check
from router.http.limits import ConnectionLimits
from router.http.pace import EARLY_S, BodyPace

log = logging.getLogger("router.http")

LINGER_S = 2.0
RETRY_AFTER_S = 1
Header = tuple[bytes, bytes]


def raw_answer(
    status: int,
    code: str,
    message: str,
    default_headers: Sequence[Header] = (),
    extra: Sequence[Header] = (),
) -> bytes:
    """A complete HTTP/1.1 answer with the project's error body, closing the connection."""
    body = orjson.dumps(error_body(code, message))
    headers = [
        *default_headers,
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *extra,
    ]
    lines = [STATUS_LINE[status], *(name + b": " + value + b"\r\n" for name, value in headers)]
    return b"".join([*lines, b"\r\n", body])


class EventLog:
    """Connections cut off or refused, logged at most once per ``interval_s``: thousands of slow
    clients must not flood the log. One per process."""

    def __init__(self, interval_s: float = 10.0) -> None:
        self.interval_s = interval_s
        self.counts: Counter[str] = Counter()
        self.logged = -math.inf

    def note(self, event: str, now: float) -> None:
        self.counts[event] += 1
        if now - self.logged < self.interval_s:
            return
        summary = ", ".join(f"{count} {name}" for name, count in sorted(self.counts.items()))
        log.warning(
            "slow or excess clients cut off (at most one report per %gs): %s",
            self.interval_s,
            summary,
        )
        self.counts.clear()
        self.logged = now


class Phase(enum.Enum):
    IDLE = "idle"  # between requests, or the request is complete and being answered
    HEADERS = "headers"
    BODY = "body"
    CLOSING = "closing"  # answered for the last time; what arrives is dropped


class GuardedProtocol(HttpToolsProtocol):
    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        limits: ConnectionLimits,
        events: EventLog,
        health_room: HealthRoom,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.limits = limits
        self.events = events
        self.health_room = health_room
        self._in_health_room = False
        self._phase = Phase.IDLE
        self._timer: asyncio.TimerHandle | None = None
        self._header_bytes = 0
        self._request_started = False  # a byte of the awaited request has come
        self._began_in_chunk = False
        self._chunk_bytes = 0
        self._pace: BodyPace | None = None

    # --- connection ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) - len(self.health_room) >= self.limits.max_connections:
            self.events.note("over the connection cap", self.loop.time())
            if not self.health_room.admit(self):
                self.transport = transport
                self._refuse_over_cap()
                return
            self._in_health_room = True
        super().connection_made(transport)
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._in_health_room:
            self.health_room.leave(self)
        self._cancel_timer()
        self._phase = Phase.CLOSING
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._phase is Phase.CLOSING:
            return
        if self._phase is Phase.IDLE:
            self._await_headers()
        if self._phase is Phase.HEADERS:
            self._request_started = True
        counted = self._phase is Phase.HEADERS
        self._began_in_chunk = False
        self._chunk_bytes = len(data)
        super().data_received(data)
        # A chunk in which a request began may also hold the end of the one before; it is not
        # counted, so the limit is enforced within one read (at most 256 KiB) but never early.
        if counted and self._phase is Phase.HEADERS and not self._began_in_chunk:
            self._header_bytes += len(data)
            if self._header_bytes > self.limits.max_header_bytes:
                self.events.note("headers too large", self.loop.time())
                limit = self.limits.max_header_bytes
                message = f"request line and headers are larger than {limit} bytes"
                self._answer_and_close(431, "headers_too_large", message)

    def send_400_response(self, msg: str) -> None:
        """What the HTTP parser refuses gets the one error body too: 431 when the headers
        grew past the limit within one read (the parser's own header limit struck first),
        else 400."""
        if self._phase is Phase.HEADERS and (
            self._header_bytes + self._chunk_bytes > self.limits.max_header_bytes
        ):
            limit = self.limits.max_header_bytes
            message = f"request line and headers are larger than {limit} bytes"
            self._answer_and_close(431, "headers_too_large", message)
            return
        if self._phase is Phase.CLOSING:  # already answered: the rest is dropped
            return
        self._answer_and_close(400, "bad_request", f"not an HTTP/1.1 request: {msg}")

    # --- the room for health checks over the cap ------------------------------------------

    def replaceable(self) -> bool:
        if self._phase is Phase.CLOSING:
            return True
        return self._phase is Phase.HEADERS and not self._request_started

    def evict(self) -> None:
        if self._phase is not Phase.CLOSING:
            self.events.note("silent connections over the cap closed", self.loop.time())
        self._in_health_room = False
        self._cancel_timer()
        self._phase = Phase.CLOSING
        self.transport.close()

    def _refuse_over_cap(self) -> None:
        message = "the router has as many connections as it may take; retry shortly"
        self._answer_and_close(503, "unavailable", message, RETRY_AFTER_S)

    # --- parser callbacks ----------------------------------------------------------------
    # Once the connection is answered for the last time (CLOSING), the rest of the data the
    # parser holds is dropped.

    def on_message_begin(self) -> None:
        if self._phase is Phase.CLOSING:
            return
        super().on_message_begin()
        self._began_in_chunk = True
        if self._phase is not Phase.HEADERS:
            self._await_headers()
        self._request_started = True

    def on_headers_complete(self) -> None:
        if self._phase is Phase.CLOSING:
            return
        self._cancel_timer()
        if self._in_health_room and not is_health_check(self.parser.get_method(), self.url):
            self._refuse_over_cap()
            return
        before = self.cycle
        super().on_headers_complete()
        if self.cycle is before:  # an upgrade: the connection now belongs to another protocol
            self._phase = Phase.IDLE
            return
        if self._in_health_room:
            self.cycle.keep_alive = False  # answered, then closed: the room is for the next
        self._phase = Phase.BODY
        limits = self.limits
        self._pace = BodyPace(
            limits.body_idle_timeout_s, limits.body_min_bytes_per_s, self.loop.time()
        )
        self._arm_at(self._pace.deadline(), self._body_check)

    def on_body(self, body: bytes) -> None:
        if self._phase is Phase.CLOSING:
            return
        if self._pace is not None:
            self._pace.arrived(self.loop.time(), len(body))
        super().on_body(body)

    def on_message_complete(self) -> None:
        if self._phase is Phase.CLOSING:
            return
        super().on_message_complete()
        self._cancel_timer()
        self._pace = None
        self._phase = Phase.IDLE
        if (
            self.cycle is not None
            and self.cycle.response_complete
            and not self.pipeline
            and self.timeout_keep_alive_task is None
            and not self.transport.is_closing()
        ):
            # Answered before the body ended: uvicorn armed its keep-alive timeout then and
            # every later byte of the body cancelled it. Without this the connection would
            # stay open, idle, for ever.
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )

    # --- deadlines -----------------------------------------------------------------------

    def _await_headers(self) -> None:
        self._phase = Phase.HEADERS
        self._header_bytes = 0
        self._request_started = False
        self._arm_at(self.loop.time() + self.limits.header_timeout_s, self._headers_late)

    def _held_by_router(self) -> bool:
        if self.flow is not None and self.flow.read_paused:
            return True
        # uvicorn sends 100 Continue at the application's first receive(), not before.
        return self._phase is Phase.BODY and self.cycle.waiting_for_100_continue

    def _headers_late(self) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        if self._held_by_router():
            self._arm_at(self.loop.time() + self.limits.header_timeout_s, self._headers_late)
            return
        if self.cycle is not None and not self.cycle.response_complete:
            # A pipelined request is late while the one before it is still being answered:
            # that answer completes, then the connection closes.
            self.events.note("header timeouts", self.loop.time())
            self.cycle.keep_alive = False
            self._phase = Phase.CLOSING
            return
        if not self._request_started:
            # Nothing came: there is no request to answer (an unsolicited 408 could be read
            # as the answer to a request sent later), as after uvicorn's keep-alive timeout.
            self.events.note("idle connections closed", self.loop.time())
            self._phase = Phase.CLOSING
            self.transport.close()
            return
        self.events.note("header timeouts", self.loop.time())
        timeout = self.limits.header_timeout_s
        message = f"request headers were not complete within {timeout:g} s"
        self._answer_and_close(408, "request_timeout", message)

    def _body_check(self) -> None:
        self._timer = None
        pace = self._pace
        if pace is None or self.transport.is_closing():
            return
        now = self.loop.time()
        if self._held_by_router():
            pace.excuse(now)
        elif pace.expired(now):
            self._body_late()
            return
        self._arm_at(pace.deadline(), self._body_check)

    def _body_late(self) -> None:
        self.events.note("body timeouts", self.loop.time())
        cycle = self.cycle
        if cycle.response_started:
            # The answer is sent or on its way; a 408 after it would be taken for the answer
            # to a next request.
            self._phase = Phase.CLOSING
            self.transport.close()
            return
        cycle.disconnected = True  # the application's answer, if any, is dropped
        cycle.message_event.set()
        limits = self.limits
        message = (
            f"request body too slow: more than {limits.body_idle_timeout_s:g} s without data"
            if not limits.body_min_bytes_per_s
            else f"request body too slow: more than {limits.body_idle_timeout_s:g} s without "
            f"data, or under {limits.body_min_bytes_per_s} bytes/s"
        )
        self._answer_and_close(408, "request_timeout", message)

    # --- answering and closing -----------------------------------------------------------

    def _answer_and_close(
        self, status: int, code: str, message: str, retry_after_s: int | None = None
    ) -> None:
        self._cancel_timer()
        self._phase = Phase.CLOSING
        transport = self.transport
        if transport.is_closing():  # e.g. uvicorn answered a malformed request with 400
            return
        extra = [] if retry_after_s is None else [(b"retry-after", str(retry_after_s).encode())]
        default_headers = self.server_state.default_headers
        self._unset_keepalive_if_required()
        transport.write(raw_answer(status, code, message, default_headers, extra))
        if self.flow is not None:
            self.flow.resume_reading()  # to drain what the client still sends
        if transport.can_write_eof():
            transport.write_eof()
            self._arm_at(self.loop.time() + LINGER_S, transport.close)
        else:
            transport.close()

    def _arm_at(self, when: float, callback: Callable[[], object]) -> None:
        self._cancel_timer()
        self._timer = self.loop.call_at(max(when, self.loop.time() + EARLY_S), callback)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def protocol_factory(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """What uvicorn's ``http=`` takes: uvicorn calls it with its config and server state for
    every connection. A partial carries the limits (and pickles into worker processes); uvicorn
    declares a class, hence the cast."""
    factory = functools.partial(
        GuardedProtocol,
        limits=limits,
        events=EventLog(),
        health_room=HealthRoom(limits.health_connections),
    )
    return cast("type[asyncio.Protocol]", factory)
