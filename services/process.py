"""Process primitives shared by every controller: liveness, signalling with deadlines, OS users.

PID 1 on some hosts (containers, CI sandboxes) does not reap orphans, so a process that has exited
can linger as a zombie and still answer ``kill -0``. Liveness is therefore read from
``/proc/PID/status``.
"""

from __future__ import annotations

import os
import pwd
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


class ServiceError(RuntimeError):
    """A supporting service could not be started, stopped or inspected."""


def process_state(pid: int) -> str | None:
    """The one-letter state from /proc/PID/status, or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("State:"):
                    return line.split()[1]
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def is_alive(pid: int) -> bool:
    state = process_state(pid)
    return state is not None and state not in ("Z", "X")


def process_cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def tail(path: Path, lines: int = 20) -> str:
    """The last lines of a log, for error messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log yet)"


def wait_until_dead(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_alive(pid):
            return True
        time.sleep(0.05)
    return not is_alive(pid)


def kill_now(pid: int, timeout: float = 10.0) -> None:
    """SIGKILL, as a crash would, and wait until the process is gone."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    wait_until_dead(pid, timeout)


def terminate(pid: int, graceful: signal.Signals = signal.SIGTERM, timeout: float = 30.0) -> bool:
    """Send ``graceful``, wait up to ``timeout``, then SIGKILL. True when it had to kill."""
    if not is_alive(pid):
        return False
    try:
        os.kill(pid, graceful)
    except ProcessLookupError:
        return False
    if wait_until_dead(pid, timeout):
        return False
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    if not wait_until_dead(pid, 10.0):
        raise ServiceError(f"process {pid} survived SIGKILL")
    return True


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex((host, port)) == 0


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class OsUser:
    """The unprivileged account server processes run as when the caller is root."""

    name: str
    uid: int
    gid: int

    @classmethod
    def lookup(cls, name: str) -> OsUser:
        entry = pwd.getpwnam(name)
        return cls(name=entry.pw_name, uid=entry.pw_uid, gid=entry.pw_gid)


def server_user(preferred: str = "postgres") -> OsUser | None:
    """None when we are not root (servers run as ourselves); else the unprivileged account,
    created as a system user when it does not exist yet."""
    if os.geteuid() != 0:
        return None
    try:
        return OsUser.lookup(preferred)
    except KeyError:
        subprocess.run(
            [
                "useradd",
                "--system",
                "--user-group",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                preferred,
            ],
            check=True,
        )
        return OsUser.lookup(preferred)


def make_owned_dir(path: Path, user: OsUser | None, mode: int = 0o700) -> Path:
    """Create ``path`` (and parents) and hand it to ``user``.

    Parents that the server user could not traverse (a 0700 home or mkdtemp directory) get the
    search bit for others, never the read bit, so their listing stays private; each change is
    reported on stderr because it alters a directory we do not own.
    """
    path = path.absolute()
    path.mkdir(parents=True, exist_ok=True)
    if user is not None:
        for parent in reversed(path.parents):
            mode_bits = parent.stat().st_mode
            if parent.stat().st_uid != user.uid and not mode_bits & stat.S_IXOTH:
                parent.chmod(mode_bits | stat.S_IXOTH)
                print(
                    f"shardlog: allowed others to traverse {parent} so that {user.name} "
                    f"can reach {path}",
                    file=sys.stderr,
                )
        os.chown(path, user.uid, user.gid)
    path.chmod(mode)
    return path


def run_as(
    cmd: Sequence[str | os.PathLike[str]],
    user: OsUser | None,
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 120.0,
) -> subprocess.CompletedProcess[str]:
    """Run a command to completion as ``user`` (or as ourselves); ServiceError on failure."""
    full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"}
    if user is not None:
        # The server user may have no home of its own; its working files live in the data dir.
        full_env["HOME"] = os.fspath(cwd) if cwd else "/"
        full_env["USER"] = user.name
    if env:
        full_env.update(env)
    try:
        result = subprocess.run(
            [os.fspath(part) for part in cmd],
            cwd=cwd,
            env=full_env,
            user=user.uid if user else None,
            group=user.gid if user else None,
            extra_groups=[] if user else None,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ServiceError(f"{cmd[0]} did not finish within {timeout:.0f}s") from exc
    if result.returncode != 0:
        raise ServiceError(
            f"{' '.join(os.fspath(p) for p in cmd)} failed ({result.returncode}): "
            f"{(result.stderr or result.stdout).strip()}"
        )
    return result


def children(pid: int) -> list[int]:
    """PIDs whose parent is ``pid`` (a postmaster's backends and auxiliary processes)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            with open(entry / "status", encoding="ascii", errors="replace") as status:
                for line in status:
                    if line.startswith("PPid:"):
                        if int(line.split()[1]) == pid:
                            found.append(int(entry.name))
                        break
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return found
