"""Controller for one Patroni-managed PostgreSQL node of an HA shard."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from router.cluster_defaults import DEFAULT_BIN_DIR, SUPERUSER
from services import process
from services.credentials import REPLICATION_USER, SecretStore
from services.daemon import Daemon, StartOutcome, http_ok
from services.ha_topology import NodeSpec
from services.process import OsUser, ServiceError
from services.templates import render

PATRONI_BINARY = "/usr/bin/patroni"
# Settings of postgresql.conf.j2 that patroni.yml.j2 reads too (TLS-only pg_hba lines, verified
# replication).
_PATRONI_TLS = ("ssl_required", "ssl_ca_file")


class PatroniNode:
    def __init__(
        self,
        spec: NodeSpec,
        root: Path,
        user: OsUser | None,
        etcd_hosts: str,
        bin_dir: Path = DEFAULT_BIN_DIR,
        settings: dict[str, Any] | None = None,
        secrets: SecretStore | None = None,
    ) -> None:
        self.spec = spec
        # The superuser's and the replication user's passwords (Patroni sets them at bootstrap).
        self.secrets = secrets
        self.home = root.absolute() / spec.name
        self.user = user
        self.etcd_hosts = etcd_hosts
        self.bin_dir = bin_dir
        self.settings = dict(settings or {})
        self.daemon = Daemon(spec.name, self.home, user, marker="patroni")

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def config_file(self) -> Path:
        return self.home / "patroni.yml"

    @property
    def base_conf(self) -> Path:
        return self.home / "postgresql.base.conf"

    def write_config(self) -> None:
        self.base_conf.write_text(
            render(
                "postgresql.conf.j2",
                port=self.spec.port,
                listen_addresses=self.spec.host,
                **self.settings,
            )
        )
        self.config_file.write_text(
            render(
                "patroni.yml.j2",
                scope=self.spec.shard,
                node_name=self.spec.name,
                host=self.spec.host,
                port=self.spec.port,
                rest_port=self.spec.rest_port,
                etcd_hosts=self.etcd_hosts,
                data_dir=str(self.data_dir),
                bin_dir=str(self.bin_dir),
                home=str(self.home),
                custom_conf=str(self.base_conf),
                **self._passwords(),
                **{k: v for k, v in self.settings.items() if k in _PATRONI_TLS},
            )
        )
        if self.user is not None:
            for path in (self.base_conf, self.config_file):
                os.chown(path, self.user.uid, self.user.gid)
        os.chmod(self.config_file, 0o600)  # it holds passwords

    def _passwords(self) -> dict[str, str]:
        if self.secrets is None:
            return {}
        return {
            "superuser_password": self.secrets.password(SUPERUSER),
            "replication_password": self.secrets.password(REPLICATION_USER),
        }

    def healthy(self) -> bool:
        """PostgreSQL runs under this Patroni (primary or streaming replica)."""
        return http_ok(f"{self.spec.rest_url}/health")

    def start(self, timeout: float = 90.0) -> StartOutcome:
        if not Path(PATRONI_BINARY).exists():
            raise ServiceError("patroni not found: install patroni (make install HA=1 does)")
        if not self.daemon.running():
            process.make_owned_dir(self.home, self.user)
            self.write_config()
        return self.daemon.start(
            [
                shutil.which("python3", path="/usr/bin") or "/usr/bin/python3",
                PATRONI_BINARY,
                self.config_file,
            ],
            self.healthy,
            timeout,
        )

    def info(self) -> dict[str, Any] | None:
        """Patroni's own view of the node (role, state, timeline), or None when it is down."""
        try:
            with urllib.request.urlopen(f"{self.spec.rest_url}/patroni", timeout=1) as response:  # noqa: S310
                data: dict[str, Any] = json.loads(response.read())
                return data
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def is_primary(self) -> bool:
        return http_ok(f"{self.spec.rest_url}/primary")

    def postmaster_pid(self) -> int | None:
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().splitlines()[0])
        except (FileNotFoundError, IndexError, ValueError, PermissionError):
            return None
        return pid if process.is_alive(pid) else None

    def stop(self, timeout: float = 30.0) -> bool:
        """Patroni stops its PostgreSQL on SIGTERM (and hands leadership over if it can)."""
        stopped = self.daemon.stop(timeout)
        postmaster = self.postmaster_pid()
        if postmaster is not None:
            process.terminate(postmaster, signal.SIGINT, timeout=timeout)
        return stopped

    def kill(self) -> None:
        """A crash of the whole node: SIGKILL to Patroni, the postmaster and every backend."""
        postmaster = self.postmaster_pid()
        victims = [pid for pid in (self.daemon.pid(), postmaster) if pid is not None]
        if postmaster is not None:
            victims += process.children(postmaster)
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in victims:
            process.wait_until_dead(pid, 10.0)
        (self.data_dir / "postmaster.pid").unlink(missing_ok=True)

    def status(self) -> dict[str, Any]:
        info = self.info() or {}
        role = f"patroni {info['role']}" if "role" in info else "patroni"
        return self.daemon.status(role, f"{self.spec.host}:{self.spec.port}", self.spec.shard)
