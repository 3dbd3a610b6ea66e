"""The collector process beyond softflowd's exports: IPFIX over TCP, messages that do not
parse (counted, nothing of them written), lost flows from sequence gaps, the metrics and
health endpoints."""

from __future__ import annotations

import random
import socket
import time
from dataclasses import replace

import httpx
import pytest

from bench.collector import packets
from bench.collector.packets import V5Flow, v5_message
from bench.collector.pcaps import Capture
from router import clock
from services.flowtools import FiveTuple
from tests.flowtruth.platform import (
    SWITCH,
    RunningCollector,
    capture_window,
    eventually_stored,
    probe_sets,
    probe_tuples,
    stored,
    stored_between,
)

DOMAIN = 4242


def _flows(capture: Capture, network: int, count: int) -> tuple[bytes, ...]:
    start_ms = min(p.ts_us for p in capture.packets) // 1000
    return probe_sets(network, count, start_ms)


def _eventually_stored(api: httpx.Client, capture: Capture, wanted: set[FiveTuple]) -> bool:
    return eventually_stored(api, SWITCH, *capture_window(capture), wanted)


def test_ipfix_over_tcp(collector: RunningCollector, capture: Capture, api: httpx.Client) -> None:
    learn, data = _flows(capture, network=1, count=5)
    export_s = min(p.ts_us for p in capture.packets) // 1_000_000
    stream = packets.ipfix_message([learn], export_s, sequence=0, domain=DOMAIN)
    stream += packets.ipfix_message([data], export_s, sequence=0, domain=DOMAIN)
    with socket.create_connection(("127.0.0.1", collector.ipfix_port)) as connection:
        # Sent in uneven pieces: the collector frames messages by their length field.
        for start in range(0, len(stream), 37):
            connection.sendall(stream[start : start + 37])
    assert _eventually_stored(api, capture, probe_tuples(1, 5))


def test_a_message_that_does_not_parse_writes_nothing(
    collector: RunningCollector, capture: Capture, api: httpx.Client
) -> None:
    learn, data = _flows(capture, network=2, count=6)
    export_s = min(p.ts_us for p in capture.packets) // 1_000_000
    whole = packets.ipfix_message([learn, data], export_s, sequence=0, domain=DOMAIN + 1)
    before = collector.metric("shardlog_collector_malformed_messages_total")
    rng = random.Random(7)
    broken = [whole[: len(whole) - 3], whole[:20], bytes(rng.randrange(256) for _ in range(300))]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for message in broken:
            sock.sendto(message, ("127.0.0.1", collector.udp_port))
        deadline = time.monotonic() + 10
        while collector.metric("shardlog_collector_malformed_messages_total") < before + 3:
            assert time.monotonic() < deadline, "the broken messages were not counted"
            time.sleep(0.1)
        # The collector is still up and takes the whole message after them.
        time.sleep(1.0)
        assert not set(stored(api, capture)) & probe_tuples(2, 6)
        sock.sendto(whole, ("127.0.0.1", collector.udp_port))
    assert _eventually_stored(api, capture, probe_tuples(2, 6))


def test_sequence_gaps_count_lost_flows(collector: RunningCollector, capture: Capture) -> None:
    learn, data = _flows(capture, network=3, count=4)
    export_s = min(p.ts_us for p in capture.packets) // 1_000_000
    labels = {"exporter": "127.0.0.1"}
    before = collector.metric("shardlog_collector_lost_flows_total", **labels)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for sequence in (0, 4, 4 + 4 + 10):  # 10 records of the third never came
            message = packets.ipfix_message(
                [learn, data], export_s, sequence=sequence, domain=DOMAIN + 2
            )
            sock.sendto(message, ("127.0.0.1", collector.udp_port))
    deadline = time.monotonic() + 10
    while collector.metric("shardlog_collector_lost_flows_total", **labels) < before + 10:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert collector.metric("shardlog_collector_lost_flows_total", **labels) == before + 10


@pytest.mark.parametrize("path", ["/health", "/metrics", "/nothing"])
def test_the_http_endpoint(collector: RunningCollector, path: str) -> None:
    response = httpx.get(f"{collector.metrics_url}{path}", timeout=5)
    if path == "/nothing":
        assert response.status_code == 404
    else:
        assert response.status_code == 200
    if path == "/metrics":
        assert "shardlog_collector_messages_total" in response.text


def test_an_exporter_mapping_names_the_switch(
    collector: RunningCollector, capture: Capture, api: httpx.Client
) -> None:
    """A mapping stored through the admin API reaches the running collector (the catalog's
    NOTIFY): the domain's flows go to the mapped switch; removed, to exporter-<address>."""
    domain, switch = DOMAIN + 3, "edge-mapped-1"
    mapping = {"switch": switch, "domain": domain}
    api.put("/v1/admin/exporters/127.0.0.1", json=mapping).raise_for_status()
    try:
        learn, data = _flows(capture, network=4, count=3)
        export_s = min(p.ts_us for p in capture.packets) // 1_000_000
        message = packets.ipfix_message([learn, data], export_s, sequence=0, domain=domain)
        deadline = time.monotonic() + 20
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            # Until the collector has the mapping, the flows go to exporter-127.0.0.1: send
            # again (the same 5-tuples merge there) until they reach the mapped switch.
            while not probe_tuples(4, 3) <= set(stored(api, capture, switch)):
                assert time.monotonic() < deadline, "the mapping never reached the collector"
                sock.sendto(message, ("127.0.0.1", collector.udp_port))
                time.sleep(0.5)
    finally:
        api.delete("/v1/admin/exporters/127.0.0.1", params={"domain": domain})


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def test_flows_far_in_the_future_are_dropped_and_counted(
    collector: RunningCollector, api: httpx.Client
) -> None:
    """softflowd without -a exports flows 49.7 days ahead: flows beyond the write API's future
    skew are dropped and counted, those of the present in the same message stored."""
    now_s = int(clock.time())
    month_s = 30 * 86_400
    learn, present = probe_sets(5, 3, now_s * 1000)
    _, ahead = probe_sets(6, 2, (now_s + month_s) * 1000)
    labels = {"exporter": "127.0.0.1", "reason": "in the future"}
    before = collector.metric("shardlog_collector_dropped_flows_total", **labels)
    message = packets.ipfix_message([learn, present, ahead], now_s, domain=DOMAIN + 4)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(message, ("127.0.0.1", collector.udp_port))
    window = (_iso(now_s - 86_400), _iso(now_s + 86_400))
    assert eventually_stored(api, SWITCH, *window, probe_tuples(5, 3))
    assert collector.metric("shardlog_collector_dropped_flows_total", **labels) == before + 2
    later = stored_between(api, SWITCH, _iso(now_s + month_s - 86_400), _iso(now_s + 2 * month_s))
    assert not set(later) & probe_tuples(6, 2)


def _send_counted(
    collector: RunningCollector, source: str, datagrams: list[bytes], counter: str
) -> None:
    """Sends from ``source`` in rounds the receive buffer holds, each until ``counter``
    (labelled with that exporter) counted it."""
    labels = {"exporter": source}
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((source, 0))
        for start in range(0, len(datagrams), 200):
            expected = collector.metric(counter, **labels) + len(datagrams[start : start + 200])
            for data in datagrams[start : start + 200]:
                sock.sendto(data, ("127.0.0.1", collector.udp_port))
            deadline = time.monotonic() + 10
            while collector.metric(counter, **labels) < expected:
                assert time.monotonic() < deadline, f"{counter} did not count what was sent"
                time.sleep(0.05)


def test_random_datagrams_make_no_series_of_their_own(collector: RunningCollector) -> None:
    """3,000 random datagrams once made 2,935 version series (/metrics grew to 510 KB): an
    unknown version is counted as version="other"."""
    rng = random.Random(35)
    datagrams = [
        rng.randrange(11, 1 << 16).to_bytes(2) + rng.randbytes(rng.randrange(0, 300))
        for _ in range(3000)
    ]
    before = httpx.get(f"{collector.metrics_url}/metrics", timeout=5).text
    _send_counted(collector, "127.0.0.2", datagrams, "shardlog_collector_messages_total")
    text = httpx.get(f"{collector.metrics_url}/metrics", timeout=5).text
    who = 'exporter="127.0.0.2"'
    series = {
        line.rsplit(" ", 1)[0] for line in text.splitlines() if who in line and "_total{" in line
    }
    assert series == {
        f'shardlog_collector_malformed_messages_total{{{who},reason="unknown version"}}',
        f'shardlog_collector_messages_total{{{who},version="other"}}',
    }
    assert len(text) < len(before) + 2000


def test_random_v5_sequence_numbers_are_breaks_not_loss(collector: RunningCollector) -> None:
    """Random v5 sequence numbers once counted 876 million lost flows: each is a jump."""
    rng = random.Random(36)
    now_s = int(clock.time())
    flow = V5Flow(bytes([198, 18, 7, 1]), bytes([203, 0, 113, 1]), 2001, 8443, 6, 700, 1)
    uptime_ms = 5_000_000
    sent = [
        v5_message(
            [replace(flow, first_ms=uptime_ms - 1000, last_ms=uptime_ms - 500)],
            uptime_ms,
            now_s,
            sequence=rng.randrange(1 << 32),
        )
        for _ in range(50)
    ]
    _send_counted(collector, "127.0.0.3", sent, "shardlog_collector_messages_total")
    labels = {"exporter": "127.0.0.3"}
    assert collector.metric("shardlog_collector_lost_flows_total", **labels) == 0
    jumps = collector.metric("shardlog_collector_sequence_breaks_total", kind="jump", **labels)
    assert jumps == 49


def test_a_template_flood_cannot_evict_a_mapped_exporters_templates(
    collector: RunningCollector, api: httpx.Client
) -> None:
    """80 other addresses announcing 1,024 templates each once pushed out a mapped exporter's
    template: its next data set was held and dropped. Now it is stored."""
    domain, switch = DOMAIN + 5, "edge-mapped-flood"
    mapping = {"switch": switch, "domain": domain}
    api.put("/v1/admin/exporters/127.0.0.1", json=mapping).raise_for_status()
    try:
        now_s = int(clock.time())
        window = (_iso(now_s - 86_400), _iso(now_s + 86_400))
        learn, data = probe_sets(8, 2, now_s * 1000)
        message = packets.ipfix_message([learn, data], now_s, domain=domain)
        deadline = time.monotonic() + 20
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            while not probe_tuples(8, 2) <= set(stored_between(api, switch, *window)):
                assert time.monotonic() < deadline, "the mapping never reached the collector"
                sock.sendto(message, ("127.0.0.1", collector.udp_port))
                time.sleep(0.5)
        _flood(collector, [f"127.0.0.{n}" for n in range(10, 90)], now_s)
        _, later = probe_sets(9, 3, now_s * 1000)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.sendto(
                packets.ipfix_message([later], now_s, domain=domain),
                ("127.0.0.1", collector.udp_port),
            )
        assert eventually_stored(api, switch, *window, probe_tuples(9, 3))
    finally:
        api.delete("/v1/admin/exporters/127.0.0.1", params={"domain": domain})


def _flood(collector: RunningCollector, sources: list[str], now_s: int) -> None:
    """Each source announces 1,024 templates, 64 to a message, in rounds the collector counts
    before the next."""
    senders = []
    try:
        for source in sources:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            senders.append(sock)
            sock.bind((source, 0))
        for first in range(256, 256 + 1024, 64):
            templates = [packets.flow_template(t) for t in range(first, first + 64)]
            message = packets.ipfix_message([packets.ipfix_template_set(templates)], now_s)
            expected = collector.metric("shardlog_collector_messages_total") + len(senders)
            for sock in senders:
                sock.sendto(message, ("127.0.0.1", collector.udp_port))
            deadline = time.monotonic() + 20
            while collector.metric("shardlog_collector_messages_total") < expected:
                assert time.monotonic() < deadline, "the flood was not read"
                time.sleep(0.05)
    finally:
        for sock in senders:
            sock.close()
