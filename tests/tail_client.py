"""A tail stream's client for tests, on a plain socket so that a test decides exactly when the
connection breaks (``drop``) or stops being read (``reading=False``)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from router.cli.events import EventParser, ServerEvent


class TailClient:
    def __init__(
        self,
        base_url: str,
        path: str,
        params: list[tuple[str, str]] | dict[str, Any],
        token: str,
        last_event_id: str | None = None,
        *,
        reading: bool = True,
        receive_buffer: int | None = None,
    ) -> None:
        url = urllib.parse.urlsplit(base_url)
        self._address = (url.hostname or "127.0.0.1", url.port or 80)
        query = urllib.parse.urlencode(params, doseq=True)
        headers = [
            f"GET {path}?{query} HTTP/1.1",
            f"Host: {self._address[0]}:{self._address[1]}",
            f"Authorization: Bearer {token}",
            "Accept: text/event-stream",
            # One request per connection: a refusal (4xx) ends with its connection instead of
            # the server's keep-alive timeout (5 s a refusal before).
            "Connection: close",
        ]
        if last_event_id is not None:
            headers.append(f"Last-Event-ID: {last_event_id}")
        self._request = ("\r\n".join(headers) + "\r\n\r\n").encode()
        self._receive_buffer = receive_buffer
        self.status: int | None = None
        self.body = b""
        self.events: list[ServerEvent] = []
        self.parser = EventParser()
        self.closed = threading.Event()
        self._changed = threading.Condition()
        self._socket: socket.socket | None = None
        self._reading = threading.Event()
        if reading:
            self._reading.set()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TailClient:
        if self._socket is None:
            self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.drop()

    def start(self) -> TailClient:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if self._receive_buffer is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer)
        sock.connect(self._address)
        sock.sendall(self._request)
        self._socket = sock
        self._thread.start()
        return self

    def pause_reading(self) -> None:
        """No more reads after the one under way (if any)."""
        self._reading.clear()

    def resume_reading(self) -> None:
        self._reading.set()

    def drop(self) -> None:
        """Breaks the connection as a network failure would."""
        sock = self._socket
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self._thread.join(timeout=10)

    # --- reading -----------------------------------------------------------------------

    def _recv(self, sock: socket.socket) -> bytes:
        self._reading.wait()
        try:
            return sock.recv(65536)
        except OSError:
            return b""

    def _run(self) -> None:
        assert self._socket is not None
        sock = self._socket
        buffer = b""
        while b"\r\n\r\n" not in buffer:
            more = self._recv(sock)
            if not more:
                self._finish()
                return
            buffer += more
        head, buffer = buffer.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        chunked = any(
            line.lower().startswith("transfer-encoding:") and "chunked" in line.lower()
            for line in lines[1:]
        )
        length = _content_length(lines[1:])
        text = b""
        while True:
            if chunked:
                while b"\r\n" in buffer:
                    size_line, rest = buffer.split(b"\r\n", 1)
                    size = int(size_line.split(b";")[0], 16)
                    if len(rest) < size + 2:
                        break
                    if size == 0:
                        self._feed(text)
                        self._finish()
                        return
                    text += rest[:size]
                    buffer = rest[size + 2 :]
            else:
                text, buffer = text + buffer, b""
            text = self._feed(text)
            if self.status != 200 and length is not None and len(self.body) >= length:
                # A refusal is whole at its Content-Length: the router keeps the connection
                # alive, and waiting for it to close would wait out its keep-alive timeout.
                sock.close()
                self._finish()
                return
            more = self._recv(sock)
            if not more:
                self._finish()
                return
            buffer += more

    def _feed(self, text: bytes) -> bytes:
        if self.status != 200:
            self.body += text
            return b""
        *complete, rest = text.split(b"\n")
        for line in complete:
            event = self.parser.feed(line.decode().rstrip("\r"))
            if event is not None:
                with self._changed:
                    self.events.append(event)
                    self._changed.notify_all()
        return rest

    def _finish(self) -> None:
        with self._changed:
            self.closed.set()
            self._changed.notify_all()

    # --- what came ---------------------------------------------------------------------

    def wait(self, done: Callable[[TailClient], bool], timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not done(self):
                left = deadline - time.monotonic()
                if left <= 0 or (self.closed.is_set() and not done(self)):
                    break
                self._changed.wait(min(left, 0.2))
        assert done(self), (
            f"timed out: status {self.status}, {len(self.rows())} rows, "
            f"events {[e.event for e in self.events][-5:]}, body {self.body[:300]!r}"
        )

    def rows(self) -> list[dict[str, Any]]:
        return [json.loads(e.data) for e in list(self.events) if e.event == "message"]

    def of(self, kind: str) -> list[ServerEvent]:
        return [e for e in list(self.events) if e.event == kind]

    def subscribed(self, timeout: float = 20.0) -> TailClient:
        self.wait(lambda c: bool(c.of("subscribed")) or c.status not in (None, 200), timeout)
        return self


def settled(
    tail: TailClient,
    write_sentinel: Callable[[], None],
    is_sentinel: Callable[[dict[str, Any]], bool],
    timeout: float = 20.0,
) -> list[dict[str, Any]]:
    """The stream's rows once a sentinel has come: a row written (``write_sentinel``) after
    the rows a test waited for, so committed after them, with a later ts. The shards are read
    in commit order and rows leave in ts order, so a second copy of an earlier row (a late
    duplicate) comes before the sentinel: a test that stopped at its N-th row would not see
    it. Asserts the sentinel came once; returns the other rows."""
    write_sentinel()
    tail.wait(lambda c: any(is_sentinel(row) for row in c.rows()), timeout)
    rows = tail.rows()
    sentinels = [row for row in rows if is_sentinel(row)]
    assert len(sentinels) == 1, sentinels
    return [row for row in rows if not is_sentinel(row)]


def _content_length(header_lines: list[str]) -> int | None:
    for line in header_lines:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            return int(value.strip())
    return None
