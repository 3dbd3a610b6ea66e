"""One datagram (or one IPFIX message read from TCP) from arrival to the queue: refused when
its exporter is outside the allowed networks, decoded (all or nothing), its sequence gap
counted as lost flows, its flows tagged with the exporter's switch and queued. Everything that
is not written is counted per exporter and reason; nothing here raises on what an exporter
sends."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from router.auth.scopes import reserved_write
from router.collector.decode import Decoder
from router.collector.exporters import ExporterDirectory
from router.collector.queue import FlowQueue
from router.collector.sequences import Sequences
from router.collector.sink import Exported


class CollectorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.messages = Counter(
            "shardlog_collector_messages",
            "NetFlow/IPFIX messages read, by exporter and version",
            ["exporter", "version"],
            registry=self.registry,
        )
        self.flows = Counter(
            "shardlog_collector_flows",
            "Flows decoded and queued, by exporter",
            ["exporter"],
            registry=self.registry,
        )
        self.malformed = Counter(
            "shardlog_collector_malformed_messages",
            "Messages dropped whole because they did not parse, by exporter and reason",
            ["exporter", "reason"],
            registry=self.registry,
        )
        self.lost = Counter(
            "shardlog_collector_lost_flows",
            "Flows the exporters' sequence numbers say never arrived (v9: packets lost times "
            "the records of the message after the gap)",
            ["exporter"],
            registry=self.registry,
        )
        self.dropped = Counter(
            "shardlog_collector_dropped_flows",
            "Flows decoded but not written, by exporter and reason",
            ["exporter", "reason"],
            registry=self.registry,
        )
        self.refused = Counter(
            "shardlog_collector_refused_messages",
            "Messages from exporters outside the allowed networks or without a mapping",
            ["exporter", "reason"],
            registry=self.registry,
        )
        self.held_dropped = Counter(
            "shardlog_collector_held_sets_dropped",
            "Data sets whose template did not come in time, by exporter",
            ["exporter"],
            registry=self.registry,
        )
        self.queued = Gauge(
            "shardlog_collector_queued_flows",
            "Flows waiting for the database",
            registry=self.registry,
        )


class Intake:
    def __init__(
        self,
        decoder: Decoder,
        directory: ExporterDirectory,
        queue: FlowQueue[Exported],
        metrics: CollectorMetrics,
    ) -> None:
        self._decoder = decoder
        # Replaced whole when the exporter mappings are reloaded.
        self.directory = directory
        self._queue = queue
        self._metrics = metrics
        self._sequences = Sequences()

    def message(self, exporter: str, data: bytes, now: float) -> int:
        """The flows of one message queued; how many."""
        metrics = self._metrics
        if not self.directory.allows(exporter):
            metrics.refused.labels(exporter, "not allowed").inc()
            return 0
        decoded = self._decoder.decode(exporter, data, now)
        metrics.messages.labels(exporter, str(decoded.version)).inc()
        if decoded.malformed:
            metrics.malformed.labels(exporter, decoded.reason).inc()
            return 0
        lost = self._sequences.observe(
            exporter, decoded.domain, decoded.version, decoded.sequence, decoded.flows_expected
        )
        if lost:
            metrics.lost.labels(exporter).inc(lost)
        if not decoded.records:
            return 0
        owner = self.directory.owner(exporter, decoded.domain)
        if owner is None:
            metrics.refused.labels(exporter, "no mapping").inc()
            metrics.dropped.labels(exporter, "no mapping").inc(len(decoded.records))
            return 0
        switch, tenant = owner.switch, owner.tenant
        if reserved_write("flow", switch) is not None:
            # The write path would refuse them, and with them the batch's other flows.
            metrics.refused.labels(exporter, "reserved switch").inc()
            metrics.dropped.labels(exporter, "reserved switch").inc(len(decoded.records))
            return 0
        flows = [Exported(f, exporter, switch, tenant) for f in decoded.records]
        dropped = self._queue.offer(exporter, flows)
        if dropped:
            metrics.dropped.labels(exporter, "queue full").inc(dropped)
        metrics.flows.labels(exporter).inc(len(flows) - dropped)
        metrics.queued.set(len(self._queue))
        return len(flows) - dropped

    def expire(self, now: float) -> None:
        """Held data sets whose template did not come (and stale templates) forgotten."""
        for exporter, count in self._decoder.expire(now).items():
            self._metrics.held_dropped.labels(exporter).inc(count)
