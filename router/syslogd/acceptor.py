"""Accepting a listening socket's connections on the running loop, with a pause when the
process is out of files or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM): the listening socket stays
readable then, and accepting again at once would spin, taking the CPU from the connections
being served. The pause doubles from ``retry_s`` up to ``retry_max_s`` and starts again at
``retry_s`` once a connection is accepted; meanwhile the kernel keeps new connections in the
socket's backlog, so a sender that comes then is accepted late, not refused."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

# Connections taken per wake-up, so that one busy socket does not hold up the loop.
BURST = 100

OnConnection = Callable[[socket.socket, tuple[object, ...]], None]
OnPause = Callable[[OSError, float], None]


def listening_sockets(host: str, port: int, backlog: int = 1024) -> list[socket.socket]:
    """Non-blocking TCP sockets listening on every address ``host`` names (as asyncio's
    start_server binds them)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(backlog)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


class Acceptor:
    def __init__(
        self,
        sock: socket.socket,
        on_connection: OnConnection,
        retry_s: float,
        retry_max_s: float,
        on_pause: OnPause,
    ) -> None:
        self._sock = sock
        self._on_connection = on_connection
        self._retry_s = retry_s
        self._retry_max_s = retry_max_s
        self._on_pause = on_pause
        self._pause_s = retry_s
        self._resume: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.pauses = 0

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._sock.fileno(), self._ready)

    def close(self) -> None:
        if self._resume is not None:
            self._resume.cancel()
            self._resume = None
        if self._loop is not None and self._sock.fileno() >= 0:
            self._loop.remove_reader(self._sock.fileno())
        self._sock.close()

    def _ready(self) -> None:
        for _ in range(BURST):
            try:
                conn, address = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:
                # Out of files or memory, or another failure of the socket: either way a pause,
                # never a retry at once.
                self._pause(exc)
                return
            self._pause_s = self._retry_s
            conn.setblocking(False)
            self._on_connection(conn, address)

    def _pause(self, exc: OSError) -> None:
        assert self._loop is not None
        self._loop.remove_reader(self._sock.fileno())
        self._resume = self._loop.call_later(self._pause_s, self._watch_again)
        self.pauses += 1
        self._on_pause(exc, self._pause_s)
        self._pause_s = min(2 * self._pause_s, self._retry_max_s)

    def _watch_again(self) -> None:
        self._resume = None
        assert self._loop is not None
        self._loop.add_reader(self._sock.fileno(), self._ready)
