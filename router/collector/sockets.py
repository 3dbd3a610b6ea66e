"""The collector's listening sockets: UDP for NetFlow v5/v9 and IPFIX (one datagram, one
message), TCP for IPFIX (a stream of messages, each framed by its header's length field,
RFC 7011 §10.4), and a small HTTP endpoint for /metrics and /health. UDP sockets get a large
receive buffer: exporters send in bursts (softflowd sends a whole capture's flows at once), and
what the kernel cannot hold is lost before the collector sees it. The decoder's clock is the
wall clock: templates saved with their refresh time stay valid across a restart."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from collections.abc import Callable
from typing import Protocol

from prometheus_client import CollectorRegistry, generate_latest

from router import clock
from router.collector.intake import Intake

log = logging.getLogger(__name__)

RECEIVE_BUFFER_BYTES = 32 * 1024 * 1024
IPFIX_HEADER = struct.Struct(">HH")
IPFIX_VERSION = 10
IPFIX_HEADER_BYTES = 16
HTTP_HEAD_LIMIT = 8192
METRICS_TYPE = b"text/plain; version=0.0.4; charset=utf-8"


def exporter_of(peer: tuple[object, ...]) -> str:
    return str(peer[0])


class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, intake: Intake) -> None:
        self._intake = intake

    def datagram_received(self, data: bytes, addr: tuple[str | object, int]) -> None:
        self._intake.message(exporter_of(addr), data, clock.time())

    def error_received(self, exc: Exception) -> None:
        log.debug("collector: UDP error: %s", exc)


def udp_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES)
    sock.bind((host, port))
    sock.setblocking(False)
    return sock


async def serve_udp(intake: Intake, host: str, port: int) -> asyncio.DatagramTransport:
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(
        lambda: _Datagrams(intake), sock=udp_socket(host, port)
    )
    return transport


async def serve_ipfix_tcp(intake: Intake, host: str, port: int) -> asyncio.Server:
    async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        exporter = exporter_of(writer.get_extra_info("peername"))
        try:
            while True:
                head = await reader.readexactly(IPFIX_HEADER.size)
                version, length = IPFIX_HEADER.unpack(head)
                if version != IPFIX_VERSION or length < IPFIX_HEADER_BYTES:
                    # The stream cannot be framed again after a bad length: close it.
                    intake.message(exporter, head, clock.time())
                    return
                body = await reader.readexactly(length - IPFIX_HEADER.size)
                intake.message(exporter, head + body, clock.time())
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    return await asyncio.start_server(session, host, port)


class Registered(Protocol):
    """What serve_metrics serves: the collector's metrics, or the syslog listener's."""

    @property
    def registry(self) -> CollectorRegistry: ...


async def serve_metrics(
    metrics: Registered, host: str, port: int, healthy: Callable[[], bool]
) -> asyncio.Server:
    """GET /metrics (Prometheus text) and GET /health (200 or 503); anything else 404."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            writer.close()
            return
        parts = head.split(b" ", 2)
        path = parts[1] if len(parts) > 1 and parts[0] == b"GET" else b""
        if path == b"/metrics":
            status, kind, body = b"200 OK", METRICS_TYPE, generate_latest(metrics.registry)
        elif path == b"/health":
            ok = healthy()
            status = b"200 OK" if ok else b"503 Service Unavailable"
            kind, body = b"application/json", b'{"status":"ok"}' if ok else b'{"status":"down"}'
        else:
            status, kind, body = b"404 Not Found", b"text/plain", b"not found\n"
        writer.write(
            b"HTTP/1.1 "
            + status
            + b"\r\nContent-Type: "
            + kind
            + b"\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\nConnection: close\r\n\r\n"
            + body
        )
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    return await asyncio.start_server(answer, host, port, limit=HTTP_HEAD_LIMIT)
