"""One capture for the session: 1,500 conversations (TCP and UDP, IPv4 and IPv6) over three
minutes from noon UTC of the day before the run's (the same whatever the hour it starts)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bench.collector.pcaps import Capture, generate, recent_base
from router.settings import Settings
from services.cluster import LocalCluster
from services.flowtools import Nfcapd
from tests.flowtruth.platform import RunningCollector
from tests.support import free_port_range

CONVERSATIONS = 1500


@pytest.fixture(scope="session")
def capture() -> Capture:
    return generate(CONVERSATIONS, base=recent_base(), seed=18)


@pytest.fixture(scope="session")
def pcap(capture: Capture, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return capture.write(tmp_path_factory.mktemp("flowtruth") / "conversations.pcap")


@pytest.fixture(scope="session")
def ports() -> Iterator[int]:
    """Loopback ports of our own, one per call."""
    return itertools.count(free_port_range(40))


@pytest.fixture
def nfcapd(tmp_path: Path, ports: Iterator[int]) -> Iterator[Callable[[], Nfcapd]]:
    """Start nfcapd instances for one test; every one is stopped at its end."""
    started: list[Nfcapd] = []

    def start() -> Nfcapd:
        collector = Nfcapd(tmp_path / f"nfcapd-{len(started)}", next(ports))
        collector.start()
        started.append(collector)
        return collector

    yield start
    for collector in started:
        collector.stop()


@pytest.fixture(scope="session")
def collector(
    settings: Settings,
    cluster: LocalCluster,
    ports: Iterator[int],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RunningCollector]:
    process = RunningCollector(tmp_path_factory.mktemp("collector"), settings, ports)
    process.start()
    try:
        yield process
    finally:
        process.stop()
        process.check_log()
