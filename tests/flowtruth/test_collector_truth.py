"""The collector against the reference: softflowd replays the session's capture to shardlog's
collector and to nfcapd at once (v5, v9, IPFIX; with sampling too), and what the platform then
holds for the exporter's switch, per 5-tuple, equals what nfdump prints: flows, packets, bytes
(v9/IPFIX sampled: nfcapd keeps counts unscaled where the collector scales them by the rate
softflowd announces, so nfdump's are scaled here). Templates survive a collector restart."""

from __future__ import annotations

import socket
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.collector import packets
from bench.collector.pcaps import Capture, generate
from router import clock
from services.flowtools import (
    FiveTuple,
    Nfcapd,
    Totals,
    Version,
    pmacct_replay,
    softflowd_replay,
)
from tests.flowtruth.platform import SWITCH, RunningCollector, stored, stored_between

SAMPLING = 10


def _iso_span(start: datetime, end: datetime) -> tuple[str, str]:
    return start.isoformat(), end.isoformat()


def added(after: dict[FiveTuple, Totals], before: dict[FiveTuple, Totals]) -> Counter[Any]:
    """What a replay added, per 5-tuple and measure (zeros left out)."""
    change: Counter[Any] = Counter()
    for key, totals in after.items():
        old = before.get(key, Totals(0, 0, 0))
        for measure in ("flows", "packets", "bytes"):
            change[(key, measure)] += getattr(totals, measure) - getattr(old, measure)
    return +change


def as_counter(totals: dict[FiveTuple, Totals], scale: int = 1) -> Counter[Any]:
    counter: Counter[Any] = Counter()
    for key, t in totals.items():
        counter[(key, "flows")] += t.flows
        counter[(key, "packets")] += t.packets * scale
        counter[(key, "bytes")] += t.bytes * scale
    return +counter


def replay_both(
    pcap: Path,
    collector: RunningCollector,
    nfcapd: Callable[[], Nfcapd],
    version: Version,
    log: Path,
    sample_rate: int = 0,
) -> dict[FiveTuple, Totals]:
    reference = nfcapd()
    ours = ("127.0.0.1", collector.udp_port)  # type: ignore[attr-defined]
    stats = softflowd_replay(
        pcap,
        [(reference.host, reference.port), ours],
        version,
        log,
        sample_rate=sample_rate,
        track_v6=version != 5,
    )
    assert stats.failures == 0
    reference.stop()
    return reference.totals()


def wait_for(
    api: httpx.Client,
    capture: Capture,
    before: dict[FiveTuple, Totals],
    expected: Counter[Any],
    timeout: float = 30.0,
) -> Counter[Any]:
    """What the capture's replay added to its own 5-tuples (other tests send flows of other
    5-tuples through the same collector meanwhile)."""
    own = set(capture.expected(track_v6=True))
    deadline = time.monotonic() + timeout
    while True:
        now = {key: totals for key, totals in stored(api, capture).items() if key in own}
        got = added(now, before)
        if got == expected or time.monotonic() > deadline:
            return got
        time.sleep(0.3)


@pytest.mark.parametrize("sample_rate", [0, SAMPLING], ids=["unsampled", "sampled"])
@pytest.mark.parametrize("version", [5, 9, 10])
def test_the_collector_stores_what_nfdump_reports(
    version: Version,
    sample_rate: int,
    capture: Capture,
    pcap: Path,
    collector: RunningCollector,
    nfcapd: Callable[[], Nfcapd],
    api: httpx.Client,
    tmp_path: Path,
) -> None:
    """Sampled flows are scaled: nfcapd scales v5 by its header's interval itself, and stores
    v9/IPFIX unscaled, so those are compared times the rate."""
    before = stored(api, capture)
    log = tmp_path / "softflowd.log"
    truth = replay_both(pcap, collector, nfcapd, version, log, sample_rate=sample_rate)
    expected = as_counter(truth, scale=SAMPLING if sample_rate and version != 5 else 1)
    assert expected, "nfdump saw no flows"
    got = wait_for(api, capture, before, expected)
    missing = expected - got
    extra = got - expected
    assert not missing and not extra, (list(missing.items())[:5], list(extra.items())[:5])


def test_a_capture_from_midnight_is_counted_whole(
    collector: RunningCollector,
    nfcapd: Callable[[], Nfcapd],
    api: httpx.Client,
    tmp_path: Path,
) -> None:
    """A capture starting at 00:00:00 UTC, exported as v9: the header's whole-second export
    time puts its first flows on the day before (as nfdump does), and the comparison still
    finds every one of them (the session's capture, at noon, never meets a midnight)."""
    midnight = clock.now().replace(hour=0, minute=0, second=0, microsecond=0)
    start = midnight - timedelta(days=2)
    early = generate(60, base=start, seed=36, span_s=20)
    pcap = early.write(tmp_path / "midnight.pcap")
    before = stored(api, early)
    truth = replay_both(pcap, collector, nfcapd, 9, tmp_path / "softflowd.log")
    expected = as_counter(truth)
    assert expected, "nfdump saw no flows"
    got = wait_for(api, early, before, expected)
    assert got == expected, (list((expected - got).items())[:5], list((got - expected).items())[:5])
    day_before = stored_between(api, SWITCH, *_iso_span(start - timedelta(hours=1), start))
    assert set(day_before) & set(early.expected()), "no flow was stored on the day before"


def test_templates_survive_a_restart(
    capture: Capture, collector: RunningCollector, api: httpx.Client
) -> None:
    """Data sets sent after a restart, without their template, are decoded: the collector
    saved its templates when it stopped and loaded them when it started."""
    start_ms = min(p.ts_us for p in capture.packets) // 1000
    template = packets.flow_template(777)
    flows = [
        packets.flow_record(
            bytes([198, 51, 100, n]),
            bytes([203, 0, 113, 9]),
            1000 + n,
            53,
            100 + n,
            start_ms,
            start_ms + 20,
        )
        for n in range(1, 4)
    ]
    learn = packets.ipfix_message(
        [packets.ipfix_template_set([template])], start_ms // 1000, sequence=0, domain=77
    )
    data = packets.ipfix_message(
        [packets.data_set(template, flows)], start_ms // 1000, sequence=0, domain=77
    )
    ours = ("127.0.0.1", collector.udp_port)  # type: ignore[attr-defined]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(learn, ours)
        time.sleep(0.5)
        collector.stop()
        collector.start()
        sock.sendto(data, ours)
    deadline = time.monotonic() + 20
    wanted = {FiveTuple(f"198.51.100.{n}", "203.0.113.9", 1000 + n, 53, 6) for n in range(1, 4)}
    while not wanted <= set(stored(api, capture)) and time.monotonic() < deadline:
        time.sleep(0.3)
    found = stored(api, capture)
    assert wanted <= set(found), "data sets after the restart were not decoded"
    assert {found[key].bytes for key in wanted} == {101, 102, 103}


@pytest.mark.slow
@pytest.mark.parametrize("version", [9, 10])
def test_pmacct_exports_land_as_nfdump_reports_them(
    version: Version,
    capture: Capture,
    pcap: Path,
    collector: RunningCollector,
    nfcapd: Callable[[], Nfcapd],
    api: httpx.Client,
    tmp_path: Path,
) -> None:
    """A second exporter: pmacct's nfprobe, run once to nfcapd and once to the collector (it
    reads the same capture the same way each time)."""
    reference = nfcapd()
    pmacct_replay(pcap, (reference.host, reference.port), version, tmp_path / "reference")
    reference.stop()
    expected = as_counter(reference.totals())
    assert expected
    before = stored(api, capture)
    pmacct_replay(pcap, ("127.0.0.1", collector.udp_port), version, tmp_path / "collector")
    got = wait_for(api, capture, before, expected)
    assert got == expected, (list((expected - got).items())[:5], list((got - expected).items())[:5])
