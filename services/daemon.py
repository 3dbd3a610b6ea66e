"""A long-running server process we start ourselves (etcd, Patroni, HAProxy): spawned detached
as the server user, one log file, its PID recorded, liveness judged from /proc, stopped by a
signal and then SIGKILL. Each service's controller says how to run it and when it is ready."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from services import process
from services.process import OsUser, ServiceError

StartOutcome = Literal["started", "reused"]


@dataclass
class Daemon:
    name: str
    home: Path
    user: OsUser | None
    # The program's own name as it appears in /proc/PID/cmdline, so that a reused PID of an
    # unrelated process is never taken for ours.
    marker: str
    env: dict[str, str] = field(default_factory=dict)
    stop_signal: signal.Signals = signal.SIGTERM

    @property
    def pid_file(self) -> Path:
        return self.home / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.home / f"{self.name}.log"

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if not process.is_alive(pid):
            return None
        if not any(self.marker in part for part in process.process_cmdline(pid)):
            return None
        return pid

    def running(self) -> bool:
        return self.pid() is not None

    def start(
        self,
        command: Sequence[str | os.PathLike[str]],
        ready: Callable[[], bool],
        timeout: float,
        cwd: Path | None = None,
    ) -> StartOutcome:
        """Run ``command`` unless ours is already running; wait until ``ready()``."""
        if self.running():
            self.wait_ready(ready, timeout)
            return "reused"
        process.make_owned_dir(self.home, self.user)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"}
        env["HOME"] = os.fspath(cwd or self.home)
        env.update(self.env)
        with open(self.log_file, "ab") as log:
            if self.user is not None:
                os.chown(self.log_file, self.user.uid, self.user.gid)
            child = subprocess.Popen(
                [os.fspath(part) for part in command],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=cwd or self.home,
                env=env,
                user=self.user.uid if self.user else None,
                group=self.user.gid if self.user else None,
                extra_groups=[] if self.user else None,
                start_new_session=True,
            )
        self.pid_file.write_text(f"{child.pid}\n")
        try:
            self.wait_ready(ready, timeout, child)
        except ServiceError:
            process.terminate(child.pid, self.stop_signal, timeout=5)
            raise
        return "started"

    def wait_ready(
        self,
        ready: Callable[[], bool],
        timeout: float,
        child: subprocess.Popen[bytes] | None = None,
    ) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            if child is not None and child.poll() is not None:
                raise ServiceError(
                    f"{self.name} exited with {child.returncode} during start-up; see "
                    f"{self.log_file}:\n{self.log_tail()}"
                )
            time.sleep(0.1)
        raise ServiceError(
            f"{self.name} not ready within {timeout:.0f}s; see {self.log_file}:\n" + self.log_tail()
        )

    def stop(self, timeout: float = 30.0) -> bool:
        """True when it was running."""
        pid = self.pid()
        if pid is None:
            return False
        process.terminate(pid, self.stop_signal, timeout=timeout)
        self.pid_file.unlink(missing_ok=True)
        return True

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        pid = self.pid()
        if pid is not None:
            process.kill_now(pid)

    def status(self, role: str, address: str, group: str | None = None) -> dict[str, Any]:
        pid = self.pid()
        return {
            "name": self.name,
            "role": role,
            "group": group,
            "address": address,
            "pid": pid,
            "running": pid is not None,
            "log": str(self.log_file),
        }

    def log_tail(self, lines: int = 20) -> str:
        return process.tail(self.log_file, lines)


def http_ok(url: str, timeout: float = 1.0) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310
            return bool(200 <= response.status < 300)
    except (urllib.error.URLError, OSError, ValueError):
        return False
