"""The listener's plain syslog sockets: UDP (RFC 5426: one datagram, one message; when the
queue is full the message is dropped and counted: UDP cannot push back) and streams, TCP and
TLS (RFC 6587 framing, router/protocols/syslog_framing.py; when the queue is full the session
stops reading, so its sender's TCP window closes: nothing dropped). A stream whose framing
breaks is closed; so is one over the connection caps, or silent for the idle timeout. Nothing
a sender does raises out of a handler: the unexpected is logged with the BUG marker and ends
that connection only."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

from router.collector.sockets import exporter_of, udp_socket
from router.errors import BUG_MARKER
from router.protocols.syslog_framing import StreamFramer
from router.syslogd.acceptor import Acceptor, listening_sockets
from router.syslogd.admission import Admission, ConnectionMetrics, StreamLimits
from router.syslogd.intake import Intake
from router.syslogd.queue import SyslogQueue
from router.syslogd.senders import Peer, peer_of

log = logging.getLogger("syslog")

READ_BYTES = 65536


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
            if item is not None and self._queue.offer([item]):
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


class IdleTimeout(TimeoutError):
    """Nothing came from the sender for idle_timeout_s."""


class IdleReader:
    """A stream's reads, ended by IdleTimeout when nothing came for ``idle_s`` while the
    listener owed the sender nothing (RELP answers waiting for a commit): a connection that
    sends nothing does not keep its place for ever."""

    def __init__(self, reader: asyncio.StreamReader, idle_s: float) -> None:
        self._reader = reader
        self.idle_s = idle_s
        self._owed = 0

    def owe(self, ticket: asyncio.Future[bool]) -> None:
        """Idle time does not count until ``ticket`` is resolved."""
        self._owed += 1
        ticket.add_done_callback(self._paid)

    def _paid(self, _: asyncio.Future[bool]) -> None:
        self._owed -= 1

    async def read(self, size: int) -> bytes:
        while True:
            try:
                async with asyncio.timeout(self.idle_s):
                    return await self._reader.read(size)
            except TimeoutError:
                if not self._owed:
                    raise IdleTimeout from None


Session = Callable[[IdleReader, asyncio.StreamWriter], Awaitable[None]]


class Connections:
    """The stream sessions (TCP, TLS, RELP): each accepted connection admitted under the caps
    (router/syslogd/admission.py) or closed at once, its TLS handshake and its reads held to
    the idle timeout, every session ended when the listener stops."""

    def __init__(self, intake: Intake, limits: StreamLimits, metrics: ConnectionMetrics) -> None:
        self._intake = intake
        self._limits = limits
        self._metrics = metrics
        self._admission = Admission(limits.max_connections, limits.max_per_source)
        self._acceptors: list[Acceptor] = []
        self.tasks: set[asyncio.Task[None]] = set()

    def listen(
        self, name: str, host: str, port: int, session: Session, tls: ssl.SSLContext | None = None
    ) -> None:
        for sock in listening_sockets(host, port):
            acceptor = Acceptor(
                sock,
                functools.partial(self._accepted, name, session, tls),
                self._limits.accept_retry_s,
                self._limits.accept_retry_max_s,
                self._paused,
            )
            acceptor.start()
            self._acceptors.append(acceptor)

    def _paused(self, exc: OSError, pause_s: float) -> None:
        self._metrics.accept_pauses.inc()
        open_now = self._admission.total
        detail = f"{exc}; {open_now} connections open; paused {pause_s:g} s"
        self._intake.throttled.warning("cannot accept", detail)

    def _accepted(
        self,
        name: str,
        session: Session,
        tls: ssl.SSLContext | None,
        conn: socket.socket,
        address: tuple[object, ...],
    ) -> None:
        sender = exporter_of(address)
        if not self._intake.allows(sender):
            conn.close()
            self._intake.refuse(sender, "not allowed", f"a {name} connection")
            return
        refused = self._admission.admit(sender)
        if refused is not None:
            conn.close()
            self._metrics.refused.labels(refused).inc()
            self._intake.throttled.warning(refused, f"a {name} connection from {sender} closed")
            return
        task = asyncio.get_running_loop().create_task(self._run(name, session, tls, conn, sender))
        self.tasks.add(task)

    async def _run(
        self,
        name: str,
        session: Session,
        tls: ssl.SSLContext | None,
        conn: socket.socket,
        sender: str,
    ) -> None:
        self._intake.metrics.connections.inc()
        writer: asyncio.StreamWriter | None = None
        try:
            reader, writer = await self._open(conn, tls)
            # The sender's mapping may be its TLS client certificate's: known after the handshake.
            if self._intake.admits(peer_of(writer), f"a {name} connection"):
                await session(IdleReader(reader, self._limits.idle_timeout_s), writer)
        except IdleTimeout:
            self._metrics.idle_closed.inc()
        except (ConnectionError, ssl.SSLError, TimeoutError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # the listener stops
        except Exception:
            log.exception("%s: syslog: a %s connection from %s", BUG_MARKER, name, sender)
        finally:
            self._intake.metrics.connections.dec()
            self._admission.release(sender)
            self.tasks.discard(asyncio.current_task())
            if writer is None:
                conn.close()
            else:
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()

    async def _open(
        self, conn: socket.socket, tls: ssl.SSLContext | None
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """The connection as streams, once its TLS handshake (if any) finished within the idle
        timeout."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        protocol = asyncio.StreamReaderProtocol(reader)
        idle_s = self._limits.idle_timeout_s
        try:
            async with asyncio.timeout(idle_s):
                transport, _ = await loop.connect_accepted_socket(
                    lambda: protocol,
                    conn,
                    ssl=tls,
                    # asyncio's own deadline (60 s by default) only in case ours failed
                    ssl_handshake_timeout=None if tls is None else 2 * idle_s,
                )
        except TimeoutError:
            raise IdleTimeout from None
        return reader, asyncio.StreamWriter(transport, protocol, reader, loop)

    def stop_accepting(self) -> None:
        for acceptor in self._acceptors:
            acceptor.close()
        self._acceptors.clear()

    async def close(self) -> None:
        self.stop_accepting()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


def stream_session(intake: Intake, queue: SyslogQueue) -> Session:
    async def session(reader: IdleReader, writer: asyncio.StreamWriter) -> None:
        peer = peer_of(writer)
        sender = peer.address
        framer = StreamFramer(intake.max_bytes)
        while data := await reader.read(READ_BYTES):
            oversize = framer.oversize
            items = [item for frame in framer.feed(data) if (item := intake.pending(frame, peer))]
            if framer.oversize > oversize:
                intake.refuse(sender, "oversize", "a frame dropped", framer.oversize - oversize)
            if items:
                await queue.put(items)
            if framer.broken is not None:
                intake.refuse(sender, "unframeable", f"{framer.broken}: connection closed")
                return

    return session
