"""A Docker engine to build and run shardlog's containers: the one already serving
``DOCKER_HOST`` (or /var/run/docker.sock) when there is one, else a dockerd of our own with
its data root, socket and log under ``home`` (var/docker by default), stopped again by whoever
started it. Starting one needs root; the bridge network it creates lets builds reach the Debian
mirror, and containers publish ports on 127.0.0.1 only."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from services.daemon import Daemon
from services.process import ServiceError

DEFAULT_SOCKET = Path("/var/run/docker.sock")
START_TIMEOUT_S = 60.0


class DockerEngine:
    def __init__(self, home: Path) -> None:
        self.home = home.absolute()
        # dockerd finds containerd, runc and iptables on PATH; some of them live in /usr/sbin.
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        self.daemon = Daemon("dockerd", self.home, None, marker="dockerd", env={"PATH": path})

    @property
    def own_socket(self) -> Path:
        return self.home / "docker.sock"

    def host(self) -> str:
        """The DOCKER_HOST to use: an engine already running wins over ours."""
        if self.daemon.running():
            return f"unix://{self.own_socket}"
        given = os.environ.get("DOCKER_HOST")
        if given:
            return given
        return f"unix://{DEFAULT_SOCKET}"

    def env(self) -> dict[str, str]:
        return {**os.environ, "DOCKER_HOST": self.host()}

    def answers(self, host: str | None = None) -> bool:
        if shutil.which("docker") is None:
            return False
        result = subprocess.run(
            ["docker", "version", "--format", "{{.Server.Version}}"],
            env={**os.environ, "DOCKER_HOST": host or self.host()},
            capture_output=True,
            timeout=20,
            check=False,
        )
        return result.returncode == 0

    def start(self) -> Literal["started", "reused"]:
        if self.daemon.running() or self.answers():
            return "reused"
        dockerd = shutil.which("dockerd") or "/usr/sbin/dockerd"
        if not Path(dockerd).exists():
            raise ServiceError("dockerd is not installed (make install-docker installs docker.io)")
        if os.geteuid() != 0:
            raise ServiceError("starting a Docker engine needs root; or point DOCKER_HOST at one")
        own = f"unix://{self.own_socket}"
        return self.daemon.start(
            [
                dockerd,
                "--data-root",
                self.home / "data",
                "--exec-root",
                self.home / "exec",
                "--host",
                own,
                "--pidfile",
                self.home / "dockerd.pid.engine",
                # No registry can be reached from here: fail fast instead of retrying.
                "--max-download-attempts",
                "1",
            ],
            ready=lambda: self.answers(own),
            timeout=START_TIMEOUT_S,
        )

    def stop(self) -> bool:
        """Stop our dockerd (an engine we did not start is left alone)."""
        return self.daemon.stop(timeout=60)

    def docker(
        self, *args: str | os.PathLike[str], check: bool = True, timeout: float = 1800
    ) -> subprocess.CompletedProcess[str]:
        return run(["docker", *args], self.env(), check=check, timeout=timeout)


def run(
    command: Sequence[str | os.PathLike[str]],
    env: dict[str, str],
    *,
    check: bool = True,
    timeout: float = 1800,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [os.fspath(part) for part in command],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and result.returncode != 0:
        shown = " ".join(os.fspath(part) for part in command)
        raise ServiceError(
            f"{shown} failed ({result.returncode}):\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
        )
    return result


@contextmanager
def engine_running(home: Path) -> Iterator[DockerEngine]:
    """An engine for the duration of a block; stopped afterwards if it was started here."""
    engine = DockerEngine(home)
    outcome = engine.start()
    try:
        yield engine
    finally:
        if outcome == "started":
            engine.stop()
