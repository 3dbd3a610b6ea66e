"""One step of bench/collector against one target: N flows sent at a rate, then what the
target kept. shardlog's collector keeps a flow when it is committed in the database within
the drain period after the last one was sent (the switch's sum of flow_count, by the router's
flow report); its losses are told apart as the kernel's (the socket's drops in /proc/net/udp:
its receive buffer was full), the queue's and the write path's (the collector's counters).
nfcapd keeps what nfdump finds in the file it wrote once it is stopped (a fresh nfcapd per
step). CPU seconds of the collector process (every thread) or of nfcapd over the step."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.collector.sender import Sender, Sent
from bench.harness import auth_for, cpu_seconds, machine_busy_seconds
from router import clock
from services.collector_process import CollectorProcess
from services.flowtools import Nfcapd, nfdump_flow_count, udp_drops, wait_drained

POLL_S = 0.5
# How long after its last send a step that missed its drain period may wait for the flows the
# collector took in to be committed, so that the next step starts without a backlog.
SETTLE_S = 120.0
SWITCH = "exporter-127.0.0.1"


@dataclass
class Usage:
    """CPU seconds of one process (every thread) and the cores the whole machine kept busy,
    while a ``usage`` block ran."""

    cpu_s: float = 0.0
    machine_cores: float = 0.0


@contextmanager
def usage(pid: int) -> Iterator[Usage]:
    used = Usage()
    cpu, busy, began = cpu_seconds(pid), machine_busy_seconds(), time.monotonic()
    yield used
    used.cpu_s = cpu_seconds(pid) - cpu
    used.machine_cores = (machine_busy_seconds() - busy) / (time.monotonic() - began)


@dataclass
class Step:
    target: str
    rate: int  # flows/s asked of the sender
    sent: Sent
    stored: int  # by the end of the drain period
    stored_after_s: float | None  # from the last send to the last flow stored (None: not all)
    used: Usage
    kernel_drops: int  # datagrams (of flows_per_message flows each)
    other_drops: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.stored == self.sent.flows

    @property
    def reached(self) -> bool:
        """The sender kept at least 95 % of the rate asked."""
        return self.sent.flows_per_s >= 0.95 * self.rate

    def summary(self) -> dict[str, Any]:
        sent, seconds = self.sent, self.sent.seconds
        kept = self.stored + self.other_drops.get("stored_later", 0)
        return {
            "target": self.target,
            "rate": self.rate,
            "sent": sent.flows,
            "sent_messages": sent.messages,
            "send_s": round(seconds, 3),
            "sent_flows_per_s": round(sent.flows_per_s),
            "packets_per_s": round(sent.messages / seconds) if seconds else 0,
            "stored": self.stored,
            "dropped": sent.flows - self.stored,
            "stored_after_s": None
            if self.stored_after_s is None
            else round(self.stored_after_s, 2),
            "kernel_dropped_datagrams": self.kernel_drops,
            "other_drops": self.other_drops,
            "cpu_s": round(self.used.cpu_s, 3),
            # Per flow kept in the end (stored late too): what the kernel dropped cost nothing.
            "cpu_us_per_flow": round(self.used.cpu_s / kept * 1e6, 2) if kept else None,
            "machine_cores": round(self.used.machine_cores, 2),
            "ok": self.ok,
            "reached": self.reached,
        }


def metric_sums(text: str) -> dict[str, float]:
    """Every sample of a Prometheus text page summed over its labels, by sample name."""
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
    return sums


class ShardlogTarget:
    name = "shardlog"

    def __init__(
        self, collector: CollectorProcess, port: int, router_url: str, drain_s: float
    ) -> None:
        self.collector = collector
        self.address = ("127.0.0.1", port)
        self._router_url = router_url
        self._drain_s = drain_s

    def counters(self) -> dict[str, float]:
        text = httpx.get(f"{self.collector.metrics_url}/metrics", timeout=10).text
        return metric_sums(text)

    def stored(self) -> int:
        """The switch's flows in the database so far: a day either side of now holds every
        flow of the pool, stamped when it was built, also once a midnight has passed since."""
        now = clock.now()
        params = {
            "switch": SWITCH,
            "from": (now - timedelta(days=1)).isoformat(),
            "to": (now + timedelta(days=1)).isoformat(),
            "metrics": "flows",
        }
        url = self._router_url
        response = httpx.get(
            f"{url}/v1/flows/report", params=params, headers=auth_for(url), timeout=60
        )
        if response.status_code == 404:  # the switch has no flow yet
            return 0
        response.raise_for_status()
        groups = response.json()["groups"]
        return int(groups[0]["flows"]) if groups and groups[0]["flows"] is not None else 0

    def _accepted(self, before: dict[str, float]) -> int:
        """Flows the collector queued since ``before`` (its counters then)."""
        name = "shardlog_collector_flows_total"
        return round(self.counters().get(name, 0.0) - before.get(name, 0.0))

    def measure(self, sender: Sender, rate: int, flows: int) -> Step:
        pid = self.collector.pid()
        assert pid is not None
        port = self.address[1]
        before, counted, drops = self.stored(), self.counters(), udp_drops(port)
        with usage(pid) as used:
            sent = sender.send(self.address, rate, flows)
            sent_at = time.monotonic()
            by_drain, stored_after, stored = 0, None, 0
            while True:
                stored = self.stored() - before
                waited = time.monotonic() - sent_at
                if waited <= self._drain_s:
                    by_drain = stored
                if stored >= sent.flows:
                    stored_after = waited if waited <= self._drain_s else None
                    break
                # Past the drain, the step is judged; it waits on until every flow the
                # collector took in is committed (those the kernel dropped never come), so
                # that none is counted in the next step.
                accepted = self._accepted(counted)
                if waited > self._drain_s and (stored >= accepted or waited > SETTLE_S):
                    break
                time.sleep(POLL_S)
        after = self.counters()

        def delta(name: str) -> int:
            return round(after.get(name, 0.0) - counted.get(name, 0.0))

        other = {
            "queue_or_write_path": delta("shardlog_collector_dropped_flows_total"),
            "malformed_messages": delta("shardlog_collector_malformed_messages_total"),
            "stored_later": stored - by_drain,
        }
        kernel = udp_drops(port) - drops
        return Step(self.name, rate, sent, by_drain, stored_after, used, kernel, other)


class NfcapdTarget:
    name = "nfcapd"

    def __init__(self, home: Path, port: int) -> None:
        self.home = home
        self.address = ("127.0.0.1", port)
        self._steps = 0

    def measure(self, sender: Sender, rate: int, flows: int) -> Step:
        self._steps += 1
        home = self.home / f"step-{self._steps}"
        shutil.rmtree(home, ignore_errors=True)
        port = self.address[1]
        nfcapd = Nfcapd(home, port)
        nfcapd.start()
        try:
            pid = nfcapd.daemon.pid()
            assert pid is not None
            with usage(pid) as used:
                sent = sender.send(self.address, rate, flows)
                sent_at = time.monotonic()
                wait_drained(port, 60)
                drained_s = time.monotonic() - sent_at
            drops = udp_drops(port)
        finally:
            nfcapd.stop()
        stored = nfdump_flow_count(nfcapd.flow_dir)
        shutil.rmtree(home, ignore_errors=True)
        after = drained_s if stored == sent.flows else None
        return Step(self.name, rate, sent, stored, after, used, drops)
