"""The listener's plain syslog sockets: UDP (RFC 5426: one datagram, one message; when the
queue is full the message is dropped and counted: UDP cannot push back) and streams, TCP and
TLS (RFC 6587 framing, router/protocols/syslog_framing.py; when the queue is full the session
stops reading, so its sender's TCP window closes: nothing dropped). A stream whose framing
breaks is closed. Nothing a sender does raises out of a handler: the unexpected is logged with
the BUG marker and ends that connection only."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

from router.collector.sockets import exporter_of, udp_socket
from router.errors import BUG_MARKER
from router.protocols.syslog_framing import StreamFramer
from router.syslogd.intake import Intake
from router.syslogd.queue import SyslogQueue
from router.syslogd.senders import Peer, peer_of

log = logging.getLogger("syslog")

READ_BYTES = 65536
Session = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, intake: Intake, queue: SyslogQueue) -> None:
        self._intake = intake
        self._queue = queue

    def datagram_received(self, data: bytes, addr: tuple[str | object, int]) -> None:
        sender = exporter_of(addr)
        try:
            if not self._intake.admits(Peer(sender), "a datagram"):
                return
            item = self._intake.pending(data, Peer(sender))
            if item is not None and self._queue.offer(sender, [item]):
                self._intake.metrics.count("dropped")
                self._intake.throttled.warning("queue full", f"a datagram from {sender} dropped")
        except Exception:
            log.exception("%s: syslog: a datagram from %s", BUG_MARKER, sender)

    def error_received(self, exc: Exception) -> None:
        log.debug("syslog: UDP error: %s", exc)


async def serve_udp(
    intake: Intake, queue: SyslogQueue, host: str, port: int
) -> asyncio.BaseTransport:
    loop = asyncio.get_running_loop()
    transport, _ = await loop.create_datagram_endpoint(
        lambda: _Datagrams(intake, queue), sock=udp_socket(host, port)
    )
    return transport


def tls_context(
    cert_file: Path, key_file: Path, client_ca_file: Path | None = None
) -> ssl.SSLContext:
    """TLS 1.2 or newer with the configured certificate (RFC 5425). With client CAs, a client
    certificate they signed is required (mutual TLS): a client without one fails the handshake.
    ValueError naming the setting when the files do not make a server."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(
            f"SHARDLOG_SYSLOG__TLS_CERT_FILE/TLS_KEY_FILE ({cert_file}, {key_file}): {exc}"
        ) from None
    if client_ca_file is not None:
        try:
            context.load_verify_locations(cafile=client_ca_file)
        except (OSError, ssl.SSLError) as exc:
            setting = "SHARDLOG_SYSLOG__TLS_CLIENT_CA_FILE"
            raise ValueError(f"{setting} ({client_ca_file}): {exc}") from None
        context.verify_mode = ssl.CERT_REQUIRED
    return context


class Connections:
    """The open stream sessions, so that a stopping listener can end them."""

    def __init__(self, intake: Intake) -> None:
        self._intake = intake
        self.tasks: set[asyncio.Task[None]] = set()

    def guarded(self, name: str, session: Session) -> Session:
        async def run(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            self.tasks.add(task)
            self._intake.metrics.connections.inc()
            sender = exporter_of(writer.get_extra_info("peername") or ("?", 0))
            try:
                if self._intake.admits(peer_of(writer), f"a {name} connection"):
                    await session(reader, writer)
            except (ConnectionError, ssl.SSLError, TimeoutError, asyncio.IncompleteReadError):
                pass
            except asyncio.CancelledError:
                pass  # the listener stops
            except Exception:
                log.exception("%s: syslog: a %s connection from %s", BUG_MARKER, name, sender)
            finally:
                self._intake.metrics.connections.dec()
                self.tasks.discard(task)
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()

        return run

    async def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


def stream_session(intake: Intake, queue: SyslogQueue) -> Session:
    async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = peer_of(writer)
        sender = peer.address
        framer = StreamFramer(intake.max_bytes)
        while data := await reader.read(READ_BYTES):
            oversize = framer.oversize
            items = [item for frame in framer.feed(data) if (item := intake.pending(frame, peer))]
            if framer.oversize > oversize:
                intake.refuse(sender, "oversize", "a frame dropped", framer.oversize - oversize)
            if items:
                await queue.put(sender, items)
            if framer.broken is not None:
                intake.refuse(sender, "unframeable", f"{framer.broken}: connection closed")
                return

    return session
