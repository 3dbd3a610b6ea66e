"""The paced sender: a process of its own (no event loop or GIL shared with what it measures)
holding the pre-built pool, told over a pipe to send N flows to one target at a rate. It
sends the template first and again every TEMPLATE_EVERY_S, then the pool's messages in turn
(each stamped with its exporter's next sequence number), in batches paced by
time.perf_counter: after each batch it sends what the clock says is due, and sleeps while it
is ahead. Plain sendto in a loop (Python has no sendmmsg)."""

from __future__ import annotations

import multiprocessing
import socket
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from bench.collector.pool import Pool, Version, advance, build, stamped

TEMPLATE_EVERY_S = 1.0
SEND_BUFFER = 4 << 20


@dataclass(frozen=True)
class Sent:
    flows: int
    messages: int
    seconds: float

    @property
    def flows_per_s(self) -> float:
        return self.flows / self.seconds if self.seconds else 0.0


def send(
    sock: socket.socket,
    target: tuple[str, int],
    pool: Pool,
    rate: float,
    flows: int,
    sequence: int,
) -> tuple[Sent, int]:
    """``flows`` (rounded up to whole messages) sent to ``target`` at ``rate`` flows/s; what
    was sent and the exporter's next sequence number."""
    version, per = pool.version, pool.flows_per_message
    total = -(-flows // per)
    per_s = rate / per
    messages, count = pool.messages, len(pool.messages)
    sendto = sock.sendto
    started = time.perf_counter()
    refreshed = started
    sendto(stamped(version, pool.template, sequence), target)
    sequence += advance(version, 0)
    sent = 0
    while sent < total:
        now = time.perf_counter()
        if now - refreshed >= TEMPLATE_EVERY_S:
            sendto(stamped(version, pool.template, sequence), target)
            sequence += advance(version, 0)
            refreshed = now
        due = min(total, int((now - started) * per_s) + 1)
        if due <= sent:
            time.sleep(min((sent + 1) / per_s - (now - started), 0.001))
            continue
        while sent < due:
            sendto(stamped(version, messages[sent % count], sequence), target)
            sequence += advance(version, per)
            sent += 1
    return Sent(sent * per, sent, time.perf_counter() - started), sequence


def serve(version: Version, messages: int, conn: Connection) -> None:
    """The sender process: builds the pool, says ready, then serves ("send", host, port, rate,
    flows) requests with a Sent each until ("stop",)."""
    pool = build(version, messages)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
    sock.bind(("127.0.0.1", 0))
    sequences: dict[tuple[str, int], int] = {}
    conn.send(("ready", pool.flows))
    while True:
        request = conn.recv()
        if request[0] != "send":
            break
        _, host, port, rate, flows = request
        sent, sequences[(host, port)] = send(
            sock, (host, port), pool, rate, flows, sequences.get((host, port), 0)
        )
        conn.send(sent)
    sock.close()


class Sender:
    """The parent's handle on the sender process."""

    def __init__(self, version: Version, messages: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process: Any = context.Process(
            target=serve, args=(version, messages, child), daemon=True
        )
        self._process.start()
        child.close()
        if not self._conn.poll(120):
            raise RuntimeError("the sender did not build its pool within 120 s")
        _, self.pool_flows = self._conn.recv()

    @property
    def pid(self) -> int:
        return int(self._process.pid)

    def send(self, target: tuple[str, int], rate: float, flows: int) -> Sent:
        self._conn.send(("send", target[0], target[1], rate, flows))
        sent: Sent = self._conn.recv()
        return sent

    def close(self) -> None:
        self._conn.send(("stop",))
        self._process.join(10)
        if self._process.is_alive():
            self._process.kill()
