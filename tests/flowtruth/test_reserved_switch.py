"""An exporter mapped to a switch of the platform (`shardlog.*`, which the system tenant's
admin may name) has its flows dropped and counted by the collector (reason "reserved switch"),
never written: no ingest path writes a key of the platform."""

from __future__ import annotations

import socket
import time
import uuid
from datetime import timedelta

import httpx

from router import clock
from tests.flowtruth.platform import RunningCollector, probe_message, stored_between

DROPPED = "shardlog_collector_dropped_flows_total"
DOMAIN = 4343
NETWORK = 61
FLOWS = 3


def test_a_platform_switch_is_dropped_and_counted(
    collector: RunningCollector, api: httpx.Client
) -> None:
    switch = f"shardlog.switch-{uuid.uuid4().hex[:10]}"
    mapping = {"switch": switch, "domain": DOMAIN, "tenant": "system"}
    api.put("/v1/admin/exporters/127.0.0.1", json=mapping).raise_for_status()
    try:
        before = dropped(collector)
        message = probe_message(NETWORK, FLOWS, DOMAIN)
        deadline = time.monotonic() + 20
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            # Until the collector has the mapping, the flows go to exporter-127.0.0.1: send
            # again until they meet the mapped switch.
            while dropped(collector) < before + FLOWS:
                assert time.monotonic() < deadline, "the reserved switch's flows were not dropped"
                sock.sendto(message, ("127.0.0.1", collector.udp_port))
                time.sleep(0.3)
        now = clock.now()
        start, end = (now - timedelta(days=1)).isoformat(), (now + timedelta(hours=1)).isoformat()
        assert stored_between(api, switch, start, end) == {}
    finally:
        api.delete("/v1/admin/exporters/127.0.0.1", params={"domain": DOMAIN})


def dropped(collector: RunningCollector) -> float:
    return collector.metric(DROPPED, exporter="127.0.0.1", reason="reserved switch")
