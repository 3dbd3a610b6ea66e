"""Controller for the local HAProxy: per shard a write port that follows the primary and a
read port over the replicas, both chosen by Patroni's REST health checks."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from services import process
from services.daemon import Daemon, StartOutcome
from services.ha_topology import HaTopology
from services.process import OsUser, ServiceError
from services.templates import render


class HAProxyServer:
    def __init__(self, topology: HaTopology, root: Path, user: OsUser | None) -> None:
        self.topology = topology
        self.home = root.absolute() / "haproxy"
        self.daemon = Daemon("haproxy", self.home, user, marker="haproxy")

    @property
    def config_file(self) -> Path:
        return self.home / "haproxy.cfg"

    def render_config(self) -> str:
        return render(
            "haproxy.cfg.j2",
            host=self.topology.host,
            stats_port=self.topology.stats_port,
            shards=self.topology.shards,
        )

    def ready(self) -> bool:
        return process.port_in_use(self.topology.host, self.topology.stats_port)

    def start(self, timeout: float = 15.0) -> StartOutcome:
        binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
        if not Path(binary).exists():
            raise ServiceError("haproxy not found: install haproxy (make install HA=1 does)")
        if not self.daemon.running():
            self.home.mkdir(parents=True, exist_ok=True)
            self.config_file.write_text(self.render_config())
        # -W master-worker, -db stay in the foreground: we hold the PID and the log.
        return self.daemon.start([binary, "-W", "-db", "-f", self.config_file], self.ready, timeout)

    def stop(self, timeout: float = 15.0) -> bool:
        return self.daemon.stop(timeout)

    def running(self) -> bool:
        return self.daemon.running()

    def status(self) -> dict[str, Any]:
        return self.daemon.status(
            "haproxy", f"{self.topology.host}:{self.topology.stats_port} (stats)"
        )
