"""Controller for one local etcd member (the DCS Patroni keeps its leader keys in)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from services.daemon import Daemon, StartOutcome, http_ok
from services.ha_topology import EtcdSpec
from services.process import OsUser, ServiceError
from services.templates import render

ETCD_BINARY = "etcd"


class EtcdServer:
    def __init__(self, spec: EtcdSpec, root: Path, user: OsUser | None) -> None:
        self.spec = spec
        self.home = root.absolute() / spec.name
        self.daemon = Daemon(spec.name, self.home, user, marker="etcd")

    @property
    def config_file(self) -> Path:
        return self.home / "etcd.conf.yml"

    def ready(self) -> bool:
        return http_ok(f"{self.spec.client_url}/health")

    def start(self, timeout: float = 30.0) -> StartOutcome:
        binary = shutil.which(ETCD_BINARY) or "/usr/bin/etcd"
        if not Path(binary).exists():
            raise ServiceError("etcd not found: install etcd-server (make install HA=1 does)")
        if not self.daemon.running():
            self.home.mkdir(parents=True, exist_ok=True)
            self.config_file.write_text(
                render(
                    "etcd.conf.yml.j2",
                    member_name=self.spec.name,
                    data_dir=str(self.home / "data"),
                    host=self.spec.host,
                    client_port=self.spec.client_port,
                    peer_port=self.spec.peer_port,
                )
            )
        return self.daemon.start([binary, "--config-file", self.config_file], self.ready, timeout)

    def stop(self, timeout: float = 15.0) -> bool:
        return self.daemon.stop(timeout)

    def running(self) -> bool:
        return self.daemon.running()

    def status(self) -> dict[str, Any]:
        return self.daemon.status("etcd", f"{self.spec.host}:{self.spec.client_port}")
