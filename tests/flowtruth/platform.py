"""The collector as the flow tests run it, and what the platform holds for its exporter."""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson

from bench.collector.pcaps import Capture
from router.settings import Settings
from services.collector_process import CollectorProcess
from services.flowtools import FiveTuple, Totals
from tests.support import logged_bugs, settings_env

SWITCH = "exporter-127.0.0.1"


class RunningCollector(CollectorProcess):
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

    def check_log(self) -> None:
        log = self.log_file.read_text(errors="replace")
        assert not logged_bugs(log) and "Traceback" not in log, log[-4000:]

    def metric(self, name: str, **labels: str) -> float:
        """A sample of the collector's /metrics (0 when absent)."""
        text = httpx.get(f"{self.metrics_url}/metrics", timeout=5).text
        wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        total = 0.0
        for line in text.splitlines():
            if line.startswith("#") or " " not in line:
                continue
            series, value = line.rsplit(" ", 1)
            metric, _, rest = series.partition("{")
            found = ",".join(sorted(rest.rstrip("}").split(","))) if rest else ""
            if metric == name and (not labels or found == wanted):
                total += float(value)
        return total


def day_window(capture: Capture) -> tuple[str, str]:
    start = min(p.ts_us for p in capture.packets) // 1_000_000
    day = time.strftime("%Y-%m-%d", time.gmtime(start))
    return f"{day}T00:00:00Z", f"{day}T23:59:59.999999Z"


def stored(api: httpx.Client, capture: Capture, switch: str = SWITCH) -> dict[FiveTuple, Totals]:
    """The switch's flows as the platform holds them, per 5-tuple."""
    start, end = day_window(capture)
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
        totals[key] = Totals(item["flow_count"], item["packets"], item["bytes"])
    return totals
