"""Controller for the NetFlow/IPFIX collector as a background process (`shardlog collector`,
what `make up` starts beside the router): ready when its /health answers, stopped by SIGTERM
(it writes what it has queued and saves its templates first), then SIGKILL."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Literal

from services.daemon import Daemon, http_ok

REPO = Path(__file__).resolve().parent.parent
# The clock's settings (router/clock.py) reach every process of a test alike: the daemon starts
# with a clean environment, so they are passed on from ours.
CLOCK_PREFIX = "SHARDLOG_CLOCK__"


class CollectorProcess:
    # The `shardlog` command it runs; also the name of its directory, log and pid file.
    command = "collector"

    def __init__(self, root: Path, host: str, metrics_port: int, env: dict[str, str]) -> None:
        """``env``: the SHARDLOG_* settings it runs with (the cluster's, the collector's)."""
        self.host = host
        self.metrics_port = metrics_port
        name = self.command
        inherited = {
            key: value for key, value in os.environ.items() if key.startswith(CLOCK_PREFIX)
        }
        self._daemon = Daemon(name, root.absolute() / name, None, name, {**inherited, **env})

    @property
    def log_file(self) -> Path:
        return self._daemon.log_file

    @property
    def metrics_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.metrics_port}"

    def pid(self) -> int | None:
        return self._daemon.pid()

    def start(self, timeout: float = 30.0) -> Literal["started", "reused"]:
        return self._daemon.start(
            [sys.executable, "-m", "router.cli", self.command],
            lambda: http_ok(f"{self.metrics_url}/health"),
            timeout,
            cwd=REPO,
        )

    def stop(self, timeout: float = 30.0) -> bool:
        return self._daemon.stop(timeout)

    def kill(self) -> None:
        self._daemon.kill()

    def log_tail(self, lines: int = 30) -> str:
        return self._daemon.log_tail(lines)

    def status(self) -> dict[str, Any]:
        return self._daemon.status(self.command, self.metrics_url)
