"""The collector as the flow tests run it, and what the platform holds for its exporter."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson

from bench.collector import packets
from bench.collector.pcaps import Capture
from router import clock
from router.settings import Settings
from services.flowtools import FiveTuple, Totals
from tests.support import TestedHelper, settings_env

SWITCH = "exporter-127.0.0.1"


class RunningCollector(TestedHelper):
    def __init__(self, home: Path, settings: Settings, ports: Iterator[int]) -> None:
        self.udp_port, self.ipfix_port, metrics = next(ports), next(ports), next(ports)
        self.state_file = home / "templates.json"
        env = {
            **settings_env(settings),
            "SHARDLOG_COLLECTOR__NETFLOW_PORT": str(self.udp_port),
            "SHARDLOG_COLLECTOR__IPFIX_PORT": str(self.ipfix_port),
            "SHARDLOG_COLLECTOR__METRICS_PORT": str(metrics),
            "SHARDLOG_COLLECTOR__STATE_FILE": str(self.state_file),
            "SHARDLOG_COLLECTOR__FLUSH_INTERVAL_S": "0.2",
        }
        super().__init__(home, "127.0.0.1", metrics, env)


# How far outside the capture a flow's stored times may lie. A NetFlow v9 header carries its
# export time in whole seconds, and every switch time (sysUptime milliseconds) of the message
# is taken relative to it, by the collector as by nfdump (RFC 3954 gives nothing finer): flows
# come out up to a second early, and one that began just after midnight is stored on the day
# before.
WINDOW_MARGIN_S = 3600


def capture_window(capture: Capture) -> tuple[str, str]:
    """From an hour before the capture's first packet to an hour after its last."""
    start = min(p.ts_us for p in capture.packets) // 1_000_000 - WINDOW_MARGIN_S
    end = max(p.ts_us for p in capture.packets) // 1_000_000 + WINDOW_MARGIN_S
    iso = "%Y-%m-%dT%H:%M:%SZ"
    return time.strftime(iso, time.gmtime(start)), time.strftime(iso, time.gmtime(end))


def stored(api: httpx.Client, capture: Capture, switch: str = SWITCH) -> dict[FiveTuple, Totals]:
    """The switch's flows around the capture as the platform holds them, per 5-tuple."""
    return stored_between(api, switch, *capture_window(capture))


def stored_between(api: httpx.Client, switch: str, start: str, end: str) -> dict[FiveTuple, Totals]:
    """The switch's flows from ``start`` to ``end`` as the platform holds them, per 5-tuple:
    summed over the days the window spans (a 5-tuple has a row in each day table its flows
    began on)."""
    params = {"switch": switch, "from": start, "to": end}
    response = api.get("/v1/flows/export", params=params)
    if response.status_code == 404:
        return {}
    response.raise_for_status()
    totals: dict[FiveTuple, Totals] = {}
    for line in response.content.splitlines():
        item = orjson.loads(line)
        key = FiveTuple(
            ipaddress.ip_address(item["src_ip"]).compressed,
            ipaddress.ip_address(item["dst_ip"]).compressed,
            item["src_port"],
            item["dst_port"],
            item["proto"],
        )
        held = totals.get(key, Totals(0, 0, 0))
        totals[key] = Totals(
            held.flows + item["flow_count"],
            held.packets + item["packets"],
            held.bytes + item["bytes"],
        )
    return totals


def probe_sets(
    network: int, count: int, start_ms: int, template_id: int = 900
) -> tuple[bytes, ...]:
    """An IPFIX template set and a data set of ``count`` TCP flows from 198.18.``network``.N
    (N from 1) to 203.0.113.1:8443, starting at ``start_ms``: flows a test sends and looks for."""
    template = packets.flow_template(template_id)
    records = [
        packets.flow_record(
            bytes([198, 18, network, n]),
            bytes([203, 0, 113, 1]),
            2000 + n,
            8443,
            700,
            start_ms,
            start_ms + 10,
        )
        for n in range(1, count + 1)
    ]
    return packets.ipfix_template_set([template]), packets.data_set(template, records)


def probe_tuples(network: int, count: int) -> set[FiveTuple]:
    """The 5-tuples of probe_sets' flows."""
    return {
        FiveTuple(f"198.18.{network}.{n}", "203.0.113.1", 2000 + n, 8443, 6)
        for n in range(1, count + 1)
    }


def probe_message(network: int, count: int, domain: int) -> bytes:
    """probe_sets' flows of this minute in one IPFIX message."""
    now_s = int(clock.time())
    sets = probe_sets(network, count, now_s * 1000)
    return packets.ipfix_message(sets, now_s, sequence=0, domain=domain)


def eventually_stored(
    api: httpx.Client,
    switch: str,
    start: str,
    end: str,
    wanted: set[FiveTuple],
    timeout: float = 20,
) -> bool:
    """Whether every 5-tuple of ``wanted`` is stored for the switch before ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if wanted <= set(stored_between(api, switch, start, end)):
            return True
        time.sleep(0.3)
    return False
