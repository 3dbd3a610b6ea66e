"""One datagram (or one IPFIX message read from TCP) from arrival to the queue: refused when
its exporter is outside the allowed networks, decoded (all or nothing), its sequence gap
counted as lost flows, flows starting further ahead of now than the write API's skew allows
(SHARDLOG_INGEST__FUTURE_SKEW_S) dropped, the others tagged with the exporter's switch and
queued. Everything that is not written is counted per exporter and reason; nothing here raises
on what an exporter sends."""

from __future__ import annotations

from datetime import UTC, datetime

from prometheus_client import CollectorRegistry, Counter, Gauge

from router import clock
from router.auth.scopes import reserved_write
from router.collector.decode import Decoder
from router.collector.exporters import ExporterDirectory
from router.collector.labels import ExporterLabels, version_label
from router.collector.queue import FlowQueue
from router.collector.sequences import Sequences
from router.collector.sink import Exported


class CollectorMetrics:
    """The collector's counters. Their exporter label comes from ``exporter`` (bounded), or
    from ``outsider`` for addresses outside the allowed networks, so that datagrams from
    outside cannot take the names of exporters inside."""

    def __init__(self, exporter_labels: int = 256) -> None:
        self.exporter = ExporterLabels(exporter_labels)
        self.outsider = ExporterLabels(exporter_labels)
        self.registry = CollectorRegistry()
        clock.register_metrics(self.registry)
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
        self.sequence_breaks = Counter(
            "shardlog_collector_sequence_breaks",
            "Sequence numbers too far from the expected one to be loss, by exporter and kind "
            "(reset: counting afresh from near 0; jump: any other)",
            ["exporter", "kind"],
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
        future_skew_s: float = 300.0,
        max_sequence_gap: int = 100_000,
    ) -> None:
        self._decoder = decoder
        self._future_skew_s = future_skew_s
        self.directory = directory
        self._queue = queue
        self._metrics = metrics
        self._sequences = Sequences(max_sequence_gap)

    @property
    def directory(self) -> ExporterDirectory:
        return self._directory

    @directory.setter
    def directory(self, directory: ExporterDirectory) -> None:
        """Replaced whole when the exporter mappings are reloaded; mapped exporters' templates
        are kept apart from the others'."""
        self._directory = directory
        self._decoder.templates.remap(directory.mapped)

    def message(self, exporter: str, data: bytes, now: float) -> int:
        """The flows of one message queued; how many."""
        metrics = self._metrics
        if not self.directory.allows(exporter):
            metrics.refused.labels(metrics.outsider(exporter), "not allowed").inc()
            return 0
        label = metrics.exporter(exporter, self.directory.mapped(exporter))
        decoded = self._decoder.decode(exporter, data, now)
        metrics.messages.labels(label, version_label(decoded.version)).inc()
        if decoded.malformed:
            metrics.malformed.labels(label, decoded.reason).inc()
            return 0
        gap = self._sequences.observe(
            exporter, decoded.domain, decoded.version, decoded.sequence, decoded.flows_expected
        )
        if gap.lost:
            metrics.lost.labels(label).inc(gap.lost)
        elif gap.broken is not None:
            metrics.sequence_breaks.labels(label, gap.broken).inc()
        if not decoded.records:
            return 0
        owner = self.directory.owner(exporter, decoded.domain)
        if owner is None:
            metrics.refused.labels(label, "no mapping").inc()
            metrics.dropped.labels(label, "no mapping").inc(len(decoded.records))
            return 0
        switch, tenant = owner.switch, owner.tenant
        if reserved_write("flow", switch) is not None:
            # The write path would refuse them, and with them the batch's other flows.
            metrics.refused.labels(label, "reserved switch").inc()
            metrics.dropped.labels(label, "reserved switch").inc(len(decoded.records))
            return 0
        latest = datetime.fromtimestamp(now + self._future_skew_s, UTC)
        flows = [
            Exported(f, exporter, switch, tenant) for f in decoded.records if f.first_seen <= latest
        ]
        if len(flows) < len(decoded.records):
            metrics.dropped.labels(label, "in the future").inc(len(decoded.records) - len(flows))
        if not flows:
            return 0
        dropped = self._queue.offer(flows)
        if dropped:
            metrics.dropped.labels(label, "queue full").inc(dropped)
        metrics.flows.labels(label).inc(len(flows) - dropped)
        metrics.queued.set(len(self._queue))
        return len(flows) - dropped

    def expire(self, now: float) -> None:
        """Held data sets whose template did not come (and stale templates) forgotten."""
        metrics = self._metrics
        for exporter, count in self._decoder.expire(now).items():
            metrics.held_dropped.labels(metrics.exporter(exporter)).inc(count)
