"""The collector process (`shardlog collector`): the router's write path without its HTTP
API, fed by the collector's sockets. It opens the catalog and the shard pools as a router
does, loads the templates it saved before (so data sets arriving after a restart decode before
their exporter refreshes its templates), listens, and until it is stopped: writes the queue's
batches, expires held data sets and stale templates every second, saves the templates every
STATE_EVERY_S and at the end, and reloads the exporter mappings (router/catalog/exporters.py)
whenever the catalog changes (a change of a mapping is one: its NOTIFY reaches the catalog
cache) and every MAPPINGS_EVERY_S besides."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from router import clock
from router.catalog import exporters
from router.catalog.snapshot import CatalogSnapshot
from router.collector import sockets
from router.collector.decode import Decoder
from router.collector.exporters import ExporterDirectory, ExporterMapping
from router.collector.intake import CollectorMetrics, Intake
from router.collector.queue import FlowQueue
from router.collector.sink import Exported
from router.collector.templates import TemplateCache
from router.collector.writer import QueueWriter
from router.db import catalog_login
from router.metrics import Metrics
from router.runtime import Runtime, close_writer, run_until_signalled
from router.settings import CollectorSettings, Settings

log = logging.getLogger("collector")

STATE_EVERY_S = 30.0
MAPPINGS_EVERY_S = 60.0
TICK_S = 1.0
# How long a stopping collector goes on writing what it has queued.
DRAIN_S = 10.0
# Where the exporter mappings come from (default: the catalog's exporters table).
Mappings = Callable[[], Awaitable[list[ExporterMapping]]]


def state_path(settings: Settings) -> Path:
    configured = settings.collector.state_file
    if configured is not None:
        return configured
    return settings.cluster.data_dir / "collector" / "templates.json"


def load_state(path: Path, settings: CollectorSettings) -> Decoder:
    """A decoder with the templates and options saved before, or none (a missing or damaged
    file is logged, not fatal)."""
    ttl_s, max_unmapped = settings.template_ttl_s, settings.unmapped_templates
    templates = TemplateCache(ttl_s, max_unmapped=max_unmapped)
    options: Any = []
    try:
        state = json.loads(path.read_text())
        templates = TemplateCache.from_state(state["templates"], ttl_s, max_unmapped=max_unmapped)
        options = state["options"]
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("collector: templates in %s not loaded: %s", path, exc)
    decoder = Decoder(templates, hold_s=settings.hold_s)
    try:
        decoder.load_options(options)
    except ValueError as exc:
        log.warning("collector: options in %s not loaded: %s", path, exc)
    return decoder


def save_state(path: Path, decoder: Decoder) -> None:
    """Templates and options written whole to a file beside it, then renamed over it: never a
    half-written state."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    state = {"templates": decoder.templates.to_state(), "options": decoder.options_state()}
    partial.write_text(json.dumps(state))
    os.replace(partial, path)


class Collector:
    def __init__(self, settings: Settings, mappings: Mappings | None = None) -> None:
        self._settings = settings
        self._mappings = mappings
        collector = settings.collector
        self.metrics = CollectorMetrics(collector.exporter_labels)
        self.queue: FlowQueue[Exported] = FlowQueue(
            collector.queue_flows, collector.batch_flows, collector.flush_interval_s
        )
        self._state = state_path(settings)
        self.decoder = load_state(self._state, collector)
        self.intake = Intake(
            self.decoder,
            self._directory([]),
            self.queue,
            self.metrics,
            settings.ingest.future_skew_s,
            collector.max_sequence_gap,
        )
        self._stopping = asyncio.Event()

    def _directory(self, mappings: list[ExporterMapping]) -> ExporterDirectory:
        collector = self._settings.collector
        return ExporterDirectory(
            mappings,
            collector.unknown_exporters,
            collector.unknown_tenant,
            collector.allowed_networks,
        )

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        settings = self._settings
        collector = settings.collector
        metadata = await catalog_login.open_pool(settings)
        runtime = Runtime.build(settings, metadata, Metrics())
        if self._mappings is None:
            self._mappings = functools.partial(exporters.list_exporters, metadata)

        async def on_catalog(_snapshot: CatalogSnapshot) -> None:
            await self._reload_mappings()

        runtime.catalog.subscribe(on_catalog)
        writer = QueueWriter(runtime.ingest, self.queue, self.metrics)
        servers: list[asyncio.Server] = []
        transports: list[asyncio.BaseTransport] = []
        try:
            await runtime.catalog.start()
            await self._reload_mappings()
            writer.start()
            host = collector.host
            transports.append(await sockets.serve_udp(self.intake, host, collector.netflow_port))
            if collector.ipfix_port != collector.netflow_port:
                transports.append(await sockets.serve_udp(self.intake, host, collector.ipfix_port))
            servers.append(await sockets.serve_ipfix_tcp(self.intake, host, collector.ipfix_port))
            servers.append(
                await sockets.serve_metrics(
                    self.metrics, host, collector.metrics_port, lambda: True
                )
            )
            log.info(
                "collector: NetFlow/IPFIX on udp %s:%d, IPFIX on udp+tcp %s:%d, metrics on %d",
                host,
                collector.netflow_port,
                host,
                collector.ipfix_port,
                collector.metrics_port,
            )
            await self._tick()
        finally:
            for transport in transports:
                transport.close()
            for server in servers:
                server.close()
            left = await writer.drain(DRAIN_S)
            if left:
                log.warning("collector: %d queued flows not written before the end", left)
            await writer.stop()
            save_state(self._state, self.decoder)
            await close_writer(runtime)

    async def _tick(self) -> None:
        saved = mapped = time.monotonic()
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), TICK_S)
            now = time.monotonic()
            self.intake.expire(clock.time())
            if now - saved >= STATE_EVERY_S:
                save_state(self._state, self.decoder)
                saved = now
            if now - mapped >= MAPPINGS_EVERY_S:
                await self._reload_mappings()
                mapped = now

    async def _reload_mappings(self) -> None:
        if self._mappings is None:
            return
        try:
            mappings = await self._mappings()
        except Exception as exc:  # the catalog unreachable: keep the mappings there are
            log.warning("collector: exporter mappings not reloaded: %s", exc)
            return
        self.intake.directory = self._directory(mappings)


def run(settings: Settings) -> int:
    """Runs until SIGTERM or SIGINT."""
    return run_until_signalled(lambda: Collector(settings))
