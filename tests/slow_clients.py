"""Slow HTTP clients on raw loopback sockets: they send a request a byte at a time and note
when the server answers and when it closes."""

from __future__ import annotations

import heapq
import selectors
import socket
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection


@dataclass
class Trickle:
    """One connection sending ``data`` one byte per ``interval`` s; it stops when answered
    unless told to go on."""

    sock: socket.socket
    data: bytes
    interval: float
    stop_on_answer: bool = True
    started: float = field(default_factory=time.monotonic)
    sent: int = 0
    next_send: float = 0.0
    answer: bytes = b""
    answered_after: float | None = None
    closed_after: float | None = None

    @property
    def done(self) -> bool:
        return self.closed_after is not None

    def send_due(self, now: float) -> None:
        if self.sent >= len(self.data) or now < self.next_send:
            return
        if self.stop_on_answer and self.answered_after is not None:
            return
        try:
            self.sock.send(self.data[self.sent : self.sent + 1])
        except OSError:  # the server closed its side; what it answered is still to be read
            self.sent = len(self.data)
            return
        self.sent += 1
        self.next_send = now + self.interval

    def read(self, now: float) -> None:
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError:
            chunk = b""
        except BlockingIOError:
            return
        if chunk and self.answered_after is None:
            self.answered_after = now - self.started
        self.answer += chunk
        if not chunk:
            self.closed_after = now - self.started
            self.sock.close()


def connect(port: int, host: str = "127.0.0.1") -> socket.socket:
    sock = socket.create_connection((host, port), timeout=5)
    sock.setblocking(False)
    return sock


def trickle_all(
    port: int,
    data: bytes,
    count: int,
    interval: float,
    limit_s: float,
    head: bytes = b"",
    stop_on_answer: bool = True,
) -> list[Trickle]:
    """``count`` connections, each sending ``head`` at once, then ``data`` a byte per
    ``interval`` s, until the server has closed every one or ``limit_s`` passed."""
    selector = selectors.DefaultSelector()
    clients = []
    for _ in range(count):
        sock = connect(port)
        if head:
            sock.sendall(head)
        client = Trickle(sock, data, interval, stop_on_answer)
        selector.register(sock, selectors.EVENT_READ, client)
        clients.append(client)
    deadline = time.monotonic() + limit_s
    try:
        while time.monotonic() < deadline and not all(c.done for c in clients):
            now = time.monotonic()
            for client in clients:
                if not client.done:
                    client.send_due(now)
            for key, _ in selector.select(timeout=min(interval, 0.05)):
                client = key.data
                client.read(time.monotonic())
                if client.done:
                    selector.unregister(key.fileobj)
    finally:
        for client in clients:
            if not client.done:
                client.sock.close()
        selector.close()
    return clients


def hold_slow_connections(port: int, count: int, interval: float, pipe: Connection) -> None:
    """Run in a process of its own (so that it does not slow the measuring test down): open
    ``count`` connections that send a request's headers a byte per ``interval`` s, report
    ``("open", n)``, keep trickling until told to stop, then report ``("still open", n)``:
    connections the server neither answered nor closed."""
    request = b"GET /health/live HTTP/1.1\r\nHost: slow\r\nX-Padding: " + b"p" * 4096
    selector = selectors.DefaultSelector()
    clients = []
    due: list[tuple[float, int]] = []
    for index in range(count):
        client = Trickle(connect(port), request, interval)
        selector.register(client.sock, selectors.EVENT_READ, client)
        clients.append(client)
        due.append((time.monotonic() + interval * index / count, index))  # spread the sends
    heapq.heapify(due)
    pipe.send(("open", len(clients)))
    while not pipe.poll(0):
        now = time.monotonic()
        while due and due[0][0] <= now:
            _, index = heapq.heappop(due)
            client = clients[index]
            if not client.done:
                client.next_send = 0.0
                client.send_due(now)
                heapq.heappush(due, (now + interval, index))
        for key, _ in selector.select(timeout=0.01):
            client = key.data
            client.read(time.monotonic())
            if client.done:
                selector.unregister(key.fileobj)
    pipe.recv()
    pipe.send(("still open", sum(1 for c in clients if not c.done and not c.answer)))
    for client in clients:
        if not client.done:
            client.sock.close()
    selector.close()
