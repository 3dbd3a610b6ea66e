"""The syslog listener as the tests run it (every port of its own, RELP and TLS on), and what
the platform holds for an owner."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx

from router.settings import Settings
from services.syslog_process import SyslogProcess
from services.tls import CertificateAuthority
from tests.support import TestedHelper, settings_env, stamped_window


class RunningSyslog(SyslogProcess, TestedHelper):
    @contextlib.contextmanager
    def running(self) -> Iterator[RunningSyslog]:
        """Started; on the way out stopped, and its log checked for unexpected errors."""
        self.start()
        try:
            yield self
        finally:
            self.stop()
            self.check_log()

    def __init__(
        self,
        home: Path,
        settings: Settings,
        ports: Iterator[int],
        extra: dict[str, str] | None = None,
    ) -> None:
        """``extra``: more SHARDLOG_SYSLOG__* settings."""
        self.port, self.tls_port, self.relp_port, metrics = (next(ports) for _ in range(4))
        self.authority = CertificateAuthority(home / "tls")
        self.authority.ensure()
        server = self.authority.issue("syslog", ["localhost", "127.0.0.1"])
        env = {
            **settings_env(settings),
            "SHARDLOG_SYSLOG__UDP_PORT": str(self.port),
            "SHARDLOG_SYSLOG__TCP_PORT": str(self.port),
            "SHARDLOG_SYSLOG__TLS_PORT": str(self.tls_port),
            "SHARDLOG_SYSLOG__RELP_PORT": str(self.relp_port),
            "SHARDLOG_SYSLOG__METRICS_PORT": str(metrics),
            "SHARDLOG_SYSLOG__TLS_CERT_FILE": str(server.cert),
            "SHARDLOG_SYSLOG__TLS_KEY_FILE": str(server.key),
            "SHARDLOG_SYSLOG__FLUSH_INTERVAL_S": "0.1",
            "SHARDLOG_SYSLOG__MAX_MESSAGE_BYTES": "4096",
            **(extra or {}),
        }
        super().__init__(home, "127.0.0.1", metrics, env)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def found(api: httpx.Client, owner: str, count: int, timeout: float = 20) -> list[dict[str, Any]]:
    """The owner's rows of the last two days once there are ``count`` (oldest first); fails
    with what there is after ``timeout``. The days before the listener's clock and before the
    real one: a real sender (logger, rsyslog) stamps its messages with the machine's clock, not
    a shifted test clock."""
    earliest, latest = stamped_window(timedelta(days=2))
    params: dict[str, str | int] = {
        "owner": owner,
        "from": earliest.isoformat(),
        "to": (latest - timedelta(days=2) + timedelta(minutes=10)).isoformat(),
        "limit": 1000,
        "order": "asc",
    }
    deadline = time.monotonic() + timeout
    items: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        response = api.get("/v1/audit/search", params=params)
        if response.status_code == 200:
            items = response.json()["items"]
            if len(items) >= count:
                return sorted(items, key=lambda item: (item["ts"], item["content"]))
        elif response.status_code != 404:
            response.raise_for_status()
        time.sleep(0.2)
    raise AssertionError(f"{owner}: {len(items)} rows of {count} after {timeout}s: {items}")


def none_found(api: httpx.Client, owner: str) -> bool:
    _, latest = stamped_window(timedelta(days=1))
    params = {
        "owner": owner,
        # 30 days back from the later clock: within the router's widest range (31 days).
        "from": (latest - timedelta(days=30)).isoformat(),
        "to": latest.isoformat(),
    }
    response = api.get("/v1/audit/search", params=params)
    return response.status_code == 404 or not response.json()["items"]
