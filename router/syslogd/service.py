"""The listener process (`shardlog syslog`): the router's write path without its HTTP API, fed
by syslog sockets. It opens the catalog and the shard pools as a router does, listens on UDP
and TCP (and TLS when a certificate is configured, RELP when a port is), and until it is
stopped writes the queue's batches. It reloads the sender mappings (router/catalog/
syslog_senders.py) whenever the catalog changes (a change of a mapping is one: its NOTIFY
reaches the catalog cache) and every MAPPINGS_EVERY_S besides; until the first load every
sender is unknown. Stopping: the sockets close, what is queued is written
(at most DRAIN_S), then RELP sessions get their last answers and ``serverclose``.

Loss window: syslog over UDP and TCP has no acknowledgement. A message is safe once its batch
committed, at most ``flush_interval_s`` (or ``batch_rows`` messages) after it was read; a crash
(SIGKILL, power loss) loses what was read and not yet committed, up to ``queue_rows`` messages,
besides what the kernel's socket buffers held. RELP answers after the commit: its sender sends
the unanswered again."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import asyncpg

from router.catalog import syslog_senders
from router.catalog.snapshot import CatalogSnapshot
from router.collector.sockets import serve_metrics
from router.db import catalog_login
from router.metrics import Metrics
from router.runtime import Runtime, close_writer, run_until_signalled
from router.settings import Settings
from router.syslogd import sockets
from router.syslogd.admission import ConnectionMetrics, stream_limits
from router.syslogd.intake import Intake, SyslogMetrics
from router.syslogd.queue import SyslogQueue
from router.syslogd.relp_server import relp_session
from router.syslogd.senders import SenderDirectory
from router.syslogd.writer import BatchWriter

log = logging.getLogger("syslog")

DRAIN_S = 10.0
MAPPINGS_EVERY_S = 60.0


class Listener:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        s = settings.syslog
        self.metrics = SyslogMetrics(Metrics())
        self.connection_metrics = ConnectionMetrics(self.metrics.registry)
        self.queue = SyslogQueue(s.queue_rows, s.batch_rows, s.flush_interval_s)
        self._stopping = asyncio.Event()
        # Checked before anything is opened: a bad certificate is one clear line at start.
        self._tls = (
            sockets.tls_context(s.tls_cert_file, s.tls_key_file, s.tls_client_ca_file)
            if s.tls_cert_file is not None and s.tls_key_file is not None
            else None
        )

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        settings = self._settings
        s = settings.syslog
        metadata = await catalog_login.open_pool(settings)
        await _check_quarantine(metadata, s.quarantine_tenant)
        runtime = Runtime.build(settings, metadata, self.metrics.base)
        intake = Intake(s, runtime.ingest.request_limits, self.metrics)
        writer = BatchWriter(runtime.ingest, self.queue, self.metrics)
        connections = sockets.Connections(intake, stream_limits(s), self.connection_metrics)
        servers: list[asyncio.Server] = []
        transports: list[asyncio.BaseTransport] = []

        async def on_catalog(_snapshot: CatalogSnapshot) -> None:
            await _reload_senders(intake, metadata, s.quarantine_tenant)

        runtime.catalog.subscribe(on_catalog)
        try:
            await runtime.catalog.start()
            await _reload_senders(intake, metadata, s.quarantine_tenant)
            if not len(intake.directory) and s.quarantine_tenant is None:
                log.warning(
                    "syslog: no sender is mapped (`shardlog syslog-senders set`): every "
                    "message is refused as from an unknown sender"
                )
            writer.start()
            transports.append(await sockets.serve_udp(intake, self.queue, s.host, s.udp_port))
            stream = sockets.stream_session(intake, self.queue)
            connections.listen("tcp", s.host, s.tcp_port, stream)
            listening = [f"udp+tcp {s.host}:{s.udp_port}/{s.tcp_port}"]
            if self._tls is not None:
                connections.listen("tls", s.host, s.tls_port, stream, self._tls)
                mutual = " (client certificates required)" if s.tls_client_ca_file else ""
                listening.append(f"tls {s.tls_port}{mutual}")
            if s.relp_port is not None:
                connections.listen("relp", s.host, s.relp_port, relp_session(intake, self.queue))
                listening.append(f"relp {s.relp_port}")
            servers.append(await serve_metrics(self.metrics, s.host, s.metrics_port, lambda: True))
            log.info("syslog: listening on %s; metrics on %d", ", ".join(listening), s.metrics_port)
            while not self._stopping.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), MAPPINGS_EVERY_S)
                await _reload_senders(intake, metadata, s.quarantine_tenant)
        finally:
            for transport in transports:
                transport.close()
            connections.stop_accepting()
            for server in servers:
                server.close()
            left = await writer.drain(DRAIN_S)
            if left:
                log.warning("syslog: %d queued messages not written before the end", left)
            await connections.close()
            await writer.stop()
            await close_writer(runtime)


async def _check_quarantine(metadata: asyncpg.Pool, tenant: str | None) -> None:
    """A quarantine tenant that does not exist stops the start (its writes would all fail)."""
    if tenant is None:
        return
    if await metadata.fetchval("SELECT 1 FROM tenants WHERE name = $1", tenant) is None:
        await metadata.close()
        raise ValueError(
            f"SHARDLOG_SYSLOG__QUARANTINE_TENANT: tenant {tenant!r} does not exist (create it: "
            "`shardlog tenants add`)"
        )


async def _reload_senders(intake: Intake, metadata: asyncpg.Pool, quarantine: str | None) -> None:
    try:
        mappings = await syslog_senders.list_senders(metadata)
    except Exception as exc:  # the catalog unreachable: keep the mappings there are
        log.warning("syslog: sender mappings not reloaded: %s", exc)
        return
    intake.directory = SenderDirectory(mappings, quarantine)


def run(settings: Settings) -> int:
    """Runs until SIGTERM or SIGINT."""
    return run_until_signalled(lambda: Listener(settings))
