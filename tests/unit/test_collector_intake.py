"""A message from arrival to the queue (router/collector/intake.py), with the real decoder:
flows tagged with their exporter's switch, malformed and refused messages counted and never
queued, sequence gaps counted as lost flows, a full queue's drops counted."""

from __future__ import annotations

import random
from typing import Literal

from bench.collector import packets
from router.collector.decode import Decoder
from router.collector.exporters import ExporterDirectory, ExporterMapping
from router.collector.intake import CollectorMetrics, Intake
from router.collector.queue import FlowQueue
from router.collector.sink import Exported

EXPORTER = "192.0.2.10"
START_MS = 1_795_000_000_000
# The intake's now: the flows' start, so none lies beyond the future skew.
NOW_S = START_MS / 1000


def _message(
    records: int, sequence: int, template_id: int = 300, starts_ms: list[int] | None = None
) -> bytes:
    template = packets.flow_template(template_id)
    starts = starts_ms or [START_MS + n for n in range(records)]
    flows = [
        packets.flow_record(
            bytes([10, 0, 0, 1]),
            bytes([10, 0, 1, n % 250]),
            40000 + n,
            443,
            1000 + n,
            start,
            start + 500,
        )
        for n, start in enumerate(starts)
    ]
    sets = [packets.ipfix_template_set([template]), packets.data_set(template, flows)]
    return packets.ipfix_message(sets, START_MS // 1000, sequence=sequence, domain=5)


def _intake(
    capacity: int = 1000,
    mappings: list[ExporterMapping] | None = None,
    unknown: Literal["name", "refuse"] = "name",
    allowed: tuple[str, ...] = (),
    exporter_labels: int = 256,
) -> tuple[Intake, FlowQueue[Exported], CollectorMetrics]:
    queue: FlowQueue[Exported] = FlowQueue(capacity, batch=10_000, flush_s=60)
    metrics = CollectorMetrics(exporter_labels)
    exporters = ExporterDirectory(mappings or [], unknown, "system", allowed)
    return Intake(Decoder(), exporters, queue, metrics), queue, metrics


def _value(metrics: CollectorMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_flows_are_queued_with_their_switch() -> None:
    mapping = ExporterMapping(EXPORTER, 5, "edge-5", "acme")
    intake, queue, metrics = _intake(mappings=[mapping])
    assert intake.message(EXPORTER, _message(3, sequence=0), NOW_S) == 3
    assert len(queue) == 3
    assert _value(metrics, "shardlog_collector_flows_total", exporter=EXPORTER) == 3
    queued = queue._items[0]
    assert (queued.switch, queued.tenant) == ("edge-5", "acme")
    assert queued.flow.dst_port == 443 and queued.flow.bytes == 1000


def test_a_malformed_message_queues_nothing_and_is_counted() -> None:
    intake, queue, metrics = _intake()
    message = _message(3, sequence=0)
    assert intake.message(EXPORTER, message[:-7], NOW_S) == 0
    assert len(queue) == 0
    total = sum(
        s.value
        for family in metrics.registry.collect()
        if family.name == "shardlog_collector_malformed_messages"
        for s in family.samples
        if s.name.endswith("_total")
    )
    assert total == 1


def test_refused_exporters_queue_nothing() -> None:
    outside, queue, metrics = _intake(allowed=("10.0.0.0/8",))
    assert outside.message(EXPORTER, _message(2, sequence=0), NOW_S) == 0
    labels = {"exporter": EXPORTER, "reason": "not allowed"}
    assert _value(metrics, "shardlog_collector_refused_messages_total", **labels) == 1
    unmapped, queue, metrics = _intake(unknown="refuse")
    assert unmapped.message(EXPORTER, _message(2, sequence=0), NOW_S) == 0
    assert len(queue) == 0
    labels = {"exporter": EXPORTER, "reason": "no mapping"}
    assert _value(metrics, "shardlog_collector_dropped_flows_total", **labels) == 2


def test_unmapped_exporters_get_a_switch_of_their_own() -> None:
    intake, queue, _ = _intake()
    intake.message(EXPORTER, _message(1, sequence=0), NOW_S)
    assert queue._items[0].switch == "exporter-192.0.2.10"


def test_a_sequence_gap_counts_lost_flows() -> None:
    intake, _, metrics = _intake()
    intake.message(EXPORTER, _message(4, sequence=0), NOW_S)
    intake.message(EXPORTER, _message(4, sequence=4 + 6), NOW_S + 1)  # 6 records never came
    assert _value(metrics, "shardlog_collector_lost_flows_total", exporter=EXPORTER) == 6


def test_a_full_queue_drops_and_counts() -> None:
    intake, queue, metrics = _intake(capacity=5)
    assert intake.message(EXPORTER, _message(8, sequence=0), NOW_S) == 5
    labels = {"exporter": EXPORTER, "reason": "queue full"}
    assert _value(metrics, "shardlog_collector_dropped_flows_total", **labels) == 3
    assert len(queue) == 5


def test_flows_beyond_the_future_skew_are_dropped_and_counted() -> None:
    """The write API's rule (SHARDLOG_INGEST__FUTURE_SKEW_S, 300 s by default): a flow may start
    at most the skew after now; one 30 days ahead (an exporter's clock or uptime gone wrong) is
    dropped and counted, never stored where searches of the present do not look."""
    intake, queue, metrics = _intake()
    day_ms = 86_400_000
    starts = [START_MS, START_MS + 300_000, START_MS + 300_001, START_MS + 30 * day_ms]
    assert intake.message(EXPORTER, _message(4, sequence=0, starts_ms=starts), NOW_S) == 2
    assert [e.flow.dst_ip[3] for e in queue._items] == [0, 1]
    labels = {"exporter": EXPORTER, "reason": "in the future"}
    assert _value(metrics, "shardlog_collector_dropped_flows_total", **labels) == 2
    assert _value(metrics, "shardlog_collector_flows_total", exporter=EXPORTER) == 2


def _series(metrics: CollectorMetrics) -> dict[str, set[tuple[tuple[str, str], ...]]]:
    """Per metric, the label sets it has a series for."""
    return {
        family.name: {tuple(sorted(sample.labels.items())) for sample in family.samples}
        for family in metrics.registry.collect()
    }


def test_random_datagrams_make_a_bounded_set_of_series() -> None:
    """3,000 random datagrams made 2,935 version series: versions beyond 5, 9 and 10 are
    "other", unmapped addresses past the label limit are "other", mapped ones keep theirs."""
    mapped = ExporterMapping("198.51.100.7", None, "edge-7", "acme")
    intake, _, metrics = _intake(mappings=[mapped], exporter_labels=4)
    rng = random.Random(5)
    for n in range(3000):
        data = rng.randbytes(rng.randrange(0, 200))
        intake.message(f"192.0.2.{n % 50}", data, NOW_S)
    intake.message(mapped.address, _message(1, sequence=0), NOW_S)
    series = _series(metrics)
    versions = {dict(labels)["version"] for labels in series["shardlog_collector_messages"]}
    assert versions <= {"5", "9", "10", "other"} and "other" in versions
    exporters = {
        dict(labels)["exporter"]
        for family in series.values()
        for labels in family
        if "exporter" in dict(labels)
    }
    assert exporters == {
        "192.0.2.0",
        "192.0.2.1",
        "192.0.2.2",
        "192.0.2.3",
        "other",
        mapped.address,
    }
    reasons = {dict(labels)["reason"] for labels in series["shardlog_collector_malformed_messages"]}
    assert len(reasons) <= 12


def test_a_restart_is_a_sequence_break_not_loss() -> None:
    intake, _, metrics = _intake()
    intake.message(EXPORTER, _message(4, sequence=3_000_000_000), NOW_S)
    intake.message(EXPORTER, _message(4, sequence=0), NOW_S + 1)
    intake.message(EXPORTER, _message(4, sequence=4 + 6), NOW_S + 2)  # 6 records never came
    assert _value(metrics, "shardlog_collector_lost_flows_total", exporter=EXPORTER) == 6
    labels = {"exporter": EXPORTER, "kind": "reset"}
    assert _value(metrics, "shardlog_collector_sequence_breaks_total", **labels) == 1
