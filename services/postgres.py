"""Controller for one local PostgreSQL instance: initdb, start, readiness, stop, status.

Servers run as an unprivileged OS user when we are root (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from router.cluster_defaults import DATABASE, DEFAULT_BIN_DIR, SUPERUSER
from services import process
from services.credentials import SecretStore
from services.process import OsUser, ServiceError
from services.templates import render

StartOutcome = Literal["started", "reused"]


@dataclass(frozen=True)
class InstanceSpec:
    name: str
    port: int
    role: Literal["metadata", "shard"]
    group: str | None = None
    host: str = "127.0.0.1"

    def dsn(self, database: str = DATABASE) -> str:
        return f"postgresql://{SUPERUSER}@{self.host}:{self.port}/{database}"


@dataclass
class PostgresInstance:
    spec: InstanceSpec
    root: Path
    user: OsUser | None
    bin_dir: Path = DEFAULT_BIN_DIR
    settings: dict[str, Any] = field(default_factory=dict)
    # The superuser's password (initdb sets it) and the password file psql reads; by default
    # under ``root`` (a local cluster shares one, under its data directory).
    secrets: SecretStore | None = None

    def __post_init__(self) -> None:
        if self.secrets is None:
            self.secrets = SecretStore(self.root / "secrets")

    @property
    def home(self) -> Path:
        return self.root / self.spec.name

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def log_file(self) -> Path:
        return self.home / "postgres.log"

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "postmaster.pid"

    def _bin(self, program: str) -> Path:
        path = self.bin_dir / program
        if not path.exists():
            raise ServiceError(f"{path} not found: install postgresql-15 (make install does)")
        return path

    def initialized(self) -> bool:
        return (self.data_dir / "PG_VERSION").exists()

    def _secrets(self) -> SecretStore:
        assert self.secrets is not None  # __post_init__
        return self.secrets

    def init(self) -> None:
        """initdb when there is no cluster yet (the superuser gets its password from the
        secrets directory; nobody is trusted); (re)write the configuration either way."""
        process.make_owned_dir(self.home, self.user)
        self._secrets().ensure([SUPERUSER])
        if not self.initialized():
            password = self._secrets().password(SUPERUSER)
            # initdb runs as the server user: the file is its, and gone right after.
            pwfile = self.home / "initdb.pwfile"
            pwfile.write_text(password + "\n")
            os.chmod(pwfile, 0o600)
            if self.user is not None:
                os.chown(pwfile, self.user.uid, self.user.gid)
            try:
                process.run_as(
                    [
                        self._bin("initdb"),
                        "-D",
                        self.data_dir,
                        f"--username={SUPERUSER}",
                        f"--pwfile={pwfile}",
                        "--encoding=UTF8",
                        "--locale=C",
                        "--auth=scram-sha-256",
                        "--no-sync",
                    ],
                    self.user,
                    cwd=self.home,
                )
            finally:
                pwfile.unlink(missing_ok=True)
        self._write_config()

    def _write_config(self) -> None:
        variables = {"port": self.spec.port, "listen_addresses": self.spec.host, **self.settings}
        for name, text in (
            ("postgresql.conf", render("postgresql.conf.j2", **variables)),
            ("pg_hba.conf", render("pg_hba.conf.j2", **variables)),
        ):
            target = self.data_dir / name
            target.write_text(text)
            if self.user is not None:
                os.chown(target, self.user.uid, self.user.gid)

    def pid(self) -> int | None:
        """PID of the postmaster serving this data directory, or None (stale files ignored)."""
        try:
            first_line = self.pid_file.read_text().splitlines()[0]
            pid = int(first_line.strip())
        except (FileNotFoundError, IndexError, ValueError):
            return None
        except PermissionError as exc:
            raise ServiceError(
                f"cannot read {self.pid_file}: permission denied; the data directory belongs "
                "to another user"
            ) from exc
        if not process.is_alive(pid):
            return None
        cmdline = process.process_cmdline(pid)
        if not cmdline or not cmdline[0].endswith("postgres"):
            return None  # the PID was reused by an unrelated process
        return pid

    def running(self) -> bool:
        return self.pid() is not None

    def ready(self) -> bool:
        result = subprocess.run(
            [
                self._bin("pg_isready"),
                "-q",
                "-h",
                self.spec.host,
                "-p",
                str(self.spec.port),
                "-U",
                SUPERUSER,
                "-d",
                "postgres",
                "-t",
                "2",
            ],
            check=False,
            capture_output=True,
        )
        return result.returncode == 0

    def start(self, timeout: float = 60.0) -> StartOutcome:
        if self.running():
            self.wait_ready(timeout)
            return "reused"
        self.init()
        if self.pid_file.exists():
            # Left by a crash or a kill -9; PostgreSQL would refuse to start while a zombie
            # still holds the recorded PID.
            self.pid_file.unlink()
        if process.port_in_use(self.spec.host, self.spec.port):
            raise ServiceError(
                f"{self.spec.name}: port {self.spec.host}:{self.spec.port} is taken by another "
                "process; choose another base port (SHARDLOG_CLUSTER__BASE_PORT)"
            )
        process.run_as(
            [self._bin("pg_ctl"), "start", "-D", self.data_dir, "-l", self.log_file, "-s", "-W"],
            self.user,
            cwd=self.home,
        )
        self.wait_ready(timeout)
        self._ensure_database()
        return "started"

    def wait_ready(self, timeout: float) -> None:
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self.ready():
                return
            if time.monotonic() - started > 2.0 and not self.running():
                raise ServiceError(
                    f"{self.spec.name} exited during start-up; see {self.log_file}:\n"
                    + self.log_tail()
                )
            time.sleep(0.1)
        raise ServiceError(
            f"{self.spec.name} not ready within {timeout:.0f}s; see {self.log_file}:\n"
            + self.log_tail()
        )

    def _ensure_database(self) -> None:
        exists = self.psql(
            "postgres", f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'"
        ).strip()
        if exists != "1":
            self.psql("postgres", f"CREATE DATABASE {DATABASE}")

    def psql(self, database: str, sql: str) -> str:
        return process.run_as(
            [
                self._bin("psql"),
                "-X",
                "-q",
                "-At",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                self.spec.host,
                "-p",
                str(self.spec.port),
                "-U",
                SUPERUSER,
                "-d",
                database,
                "-c",
                sql,
            ],
            None,
            env={"PGPASSFILE": os.fspath(self._secrets().passfile)},
        ).stdout

    def stop(self, timeout: float = 30.0) -> bool:
        """Fast shutdown, then SIGKILL after ``timeout``. True when something was running.

        SIGINT rather than SIGTERM: for the postmaster SIGTERM is a "smart" shutdown that waits
        for every client (a running router) to disconnect.
        """
        pid = self.pid()
        if pid is None:
            return False
        killed = process.terminate(pid, graceful=signal.SIGINT, timeout=timeout)
        if killed and self.pid_file.exists():
            self.pid_file.unlink()
        return True

    def kill(self) -> None:
        """Crash the instance (SIGKILL to the postmaster), as a fault would."""
        pid = self.pid()
        if pid is not None:
            process.kill_now(pid)

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.home, ignore_errors=True)

    def log_tail(self, lines: int = 20) -> str:
        return process.tail(self.log_file, lines)

    def status(self) -> dict[str, Any]:
        pid = self.pid()
        return {
            "name": self.spec.name,
            "role": self.spec.role,
            "group": self.spec.group,
            "address": f"{self.spec.host}:{self.spec.port}",
            "pid": pid,
            "running": pid is not None,
            "data_dir": str(self.data_dir),
            "log": str(self.log_file),
        }
