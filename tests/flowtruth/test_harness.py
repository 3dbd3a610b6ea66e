"""The ground truth holds: a capture replayed by softflowd (and pmacctd) into nfcapd comes out of
nfdump with the flows, packets and bytes computed from the capture itself, per 5-tuple."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench.collector.pcaps import MAX_SPAN_S, Capture, generate, recent_base
from services.flowtools import (
    FiveTuple,
    Nfcapd,
    Totals,
    Version,
    nfdump_exporters,
    pmacct_replay,
    receive,
    softflowd_replay,
    udp_socket,
)

SAMPLING = 10


def test_the_capture_is_deterministic_and_within_one_day(capture: Capture) -> None:
    again = generate(len(capture.conversations), base=recent_base(), seed=18)
    assert [p.frame for p in again.packets] == [p.frame for p in capture.packets]
    assert generate(20, base=recent_base(), seed=19).conversations != again.conversations[:20]
    days = {datetime.fromtimestamp(p.ts_us / 1e6, UTC).date() for p in capture.packets}
    assert len(days) == 1
    expected = capture.expected()
    assert all(totals.flows == 1 for totals in expected.values())
    assert sum(t.packets for t in expected.values()) == len(capture.packets)
    assert {key.proto for key in expected} == {6, 17}
    assert {":" in key.src for key in expected} == {True, False}
    # Some UDP conversations are one-way: a single direction, a single flow.
    assert len(expected) < 2 * len(capture.conversations)


@pytest.mark.parametrize("hour", range(24))
def test_the_capture_base_is_the_same_at_any_hour(hour: int) -> None:
    """At any hour (its first and last second too) the base is noon of the day before: a
    capture of the longest span from there lies in the past, on one day, hours from both of
    its midnights."""
    day = datetime(2026, 3, 1, tzinfo=UTC)  # the day after a short month's end
    for now in (day.replace(hour=hour), day.replace(hour=hour, minute=59, second=59)):
        base = recent_base(now)
        end = base + timedelta(seconds=MAX_SPAN_S)
        assert base == datetime(2026, 2, 28, 12, tzinfo=UTC)
        assert end < now and end.date() == base.date()
        assert end - base.replace(hour=0) <= timedelta(hours=13)


def test_bytes_are_the_ip_length_unless_the_frame_is_padded() -> None:
    plain = generate(50, base=recent_base(), seed=3)
    padded = generate(50, base=recent_base(), seed=3, pad_frames=True)
    for a, b in zip(plain.packets, padded.packets, strict=True):
        ip_length = len(a.frame) - 14
        assert a.wire_bytes == ip_length
        assert b.wire_bytes == max(ip_length, 46)


Replay = Callable[..., tuple[dict[FiveTuple, Totals], list[bytes]]]


@pytest.fixture
def replay(
    pcap: Path, nfcapd: Callable[[], Nfcapd], ports: Iterator[int], tmp_path: Path
) -> Replay:
    """softflowd to nfcapd and to a socket of ours at once: nfdump's totals, our datagrams."""

    def run(version: Version, **options: int) -> tuple[dict[FiveTuple, Totals], list[bytes]]:
        reference, port = nfcapd(), next(ports)
        with udp_socket(port=port) as sock:
            collectors = [(reference.host, reference.port), ("127.0.0.1", port)]
            log = tmp_path / "softflowd.log"
            stats = softflowd_replay(pcap, collectors, version, log, **options)
            assert stats.failures == 0
            datagrams = receive(sock, stats.datagrams)
        reference.stop()
        totals = reference.totals()
        assert sum(t.flows for t in totals.values()) == stats.records
        return totals, datagrams

    return run


@pytest.mark.parametrize("version", [5, 9, 10])
def test_softflowd_to_nfcapd_and_a_second_collector_equals_the_capture(
    version: Version, capture: Capture, replay: Replay
) -> None:
    totals, datagrams = replay(version)
    # NetFlow v5 carries IPv4 only: softflowd drops IPv6 packets unless -6.
    assert totals == capture.expected(track_v6=version != 5)
    assert {int.from_bytes(d[:2]) for d in datagrams} == {version}


@pytest.mark.parametrize("version", [9, 10])
def test_sampled_v9_and_ipfix_nfdump_shows_the_sampled_packets_unscaled(
    version: Version, capture: Capture, replay: Replay, tmp_path: Path
) -> None:
    """softflowd -s 10 keeps every 10th packet and announces the interval in an options record;
    nfcapd 1.7.1 registers no sampler from it and stores the sampled counts as they came."""
    totals, _ = replay(version, sample_rate=SAMPLING)
    assert totals == capture.expected(sample_rate=SAMPLING)
    assert "Sampler" not in nfdump_exporters(tmp_path / "nfcapd-0" / "flows")


def test_sampled_v5_nfdump_scales_by_the_header_interval(
    capture: Capture, replay: Replay, tmp_path: Path
) -> None:
    """v5's header carries the interval (mode 01, interval 10); nfcapd multiplies packets and
    bytes by it."""
    totals, _ = replay(5, sample_rate=SAMPLING)
    sampled = capture.expected(sample_rate=SAMPLING, track_v6=False)
    exporters = nfdump_exporters(tmp_path / "nfcapd-0" / "flows")
    assert "algorithm: 1, packet interval: 1, packet space: 9" in exporters
    assert totals == {
        key: replace(t, packets=t.packets * SAMPLING, bytes=t.bytes * SAMPLING)
        for key, t in sampled.items()
    }


@pytest.mark.slow
@pytest.mark.parametrize("version", [9, 10])
def test_pmacct_nfprobe_to_nfcapd_equals_the_capture(
    version: Version,
    capture: Capture,
    pcap: Path,
    nfcapd: Callable[[], Nfcapd],
    tmp_path: Path,
) -> None:
    reference = nfcapd()
    pmacct_replay(pcap, (reference.host, reference.port), version, tmp_path)
    reference.stop()
    assert reference.totals() == capture.expected()
