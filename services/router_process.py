"""Controller for the router as a background process (what `make up` starts)."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Literal

from services import process
from services.process import ServiceError


class RouterProcess:
    """``ca_file``: the router serves HTTPS, with a certificate this CA signed (health checks
    verify it, and the name ``host``, against it); None: plain HTTP. ``code``: run the router
    package of that checkout instead of this one (benchmarks compare two)."""

    def __init__(
        self,
        root: Path,
        host: str,
        port: int,
        env: dict[str, str] | None = None,
        ca_file: Path | None = None,
        code: Path | None = None,
    ) -> None:
        self.home = root.absolute() / "router"
        self.code = code
        self.host = host
        self.port = port
        self.env = env
        self.ca_file = ca_file

    @property
    def pid_file(self) -> Path:
        return self.home / "router.pid"

    @property
    def log_file(self) -> Path:
        return self.home / "router.log"

    @property
    def url(self) -> str:
        scheme = "https" if self.ca_file is not None else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}"

    def ssl_context(self) -> ssl.SSLContext | None:
        """What a client of this router verifies it with (None: plain HTTP)."""
        if self.ca_file is None:
            return None
        return ssl.create_default_context(cafile=os.fspath(self.ca_file))

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if process.is_alive(pid) and "serve" in process.process_cmdline(pid):
            return pid
        return None

    def _live(self) -> bool:
        try:
            with urllib.request.urlopen(  # noqa: S310
                f"{self.url}/health/live", timeout=1, context=self.ssl_context()
            ) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def start(self, timeout: float = 30.0) -> Literal["started", "reused"]:
        if self.pid() is not None:
            return "reused"
        if process.port_in_use(self.host, self.port):
            raise ServiceError(f"router port {self.host}:{self.port} is taken by another process")
        self.home.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **(self.env or {})}
        with open(self.log_file, "ab") as log:
            child = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "router.cli",
                    "serve",
                    "--host",
                    self.host,
                    "--port",
                    str(self.port),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.code,
                start_new_session=True,
            )
        self.pid_file.write_text(f"{child.pid}\n")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._live():
                return "started"
            if child.poll() is not None:
                break
            time.sleep(0.1)
        process.terminate(child.pid, timeout=5)
        self.pid_file.unlink(missing_ok=True)
        raise ServiceError(f"router did not come up; see {self.log_file}:\n{self.log_tail()}")

    def stop(self, timeout: float = 15.0) -> bool:
        pid = self.pid()
        self.pid_file.unlink(missing_ok=True)
        if pid is None:
            return False
        process.terminate(pid, timeout=timeout)
        return True

    def log_tail(self, lines: int = 30) -> str:
        return process.tail(self.log_file, lines)

    def status(self) -> dict[str, Any]:
        pid = self.pid()
        return {
            "name": "router",
            "url": self.url,
            "pid": pid,
            "running": pid is not None,
            "log": str(self.log_file),
        }
