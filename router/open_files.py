"""The process's open-files limit and the connections that fit under it: the router's HTTP
server and the syslog listener each cap their connections below it, so that accepting never
fails for want of a file and the process keeps files for its pools, logs and health checks."""

from __future__ import annotations

import resource

# Files a process needs besides client connections: database pools, logs, listening sockets.
FD_RESERVE = 256


def connection_cap(wanted: int, fd_limit: int, reserve: int = FD_RESERVE) -> int:
    """Client connections that fit under ``fd_limit`` open files; at least half of them, so a
    small limit still serves."""
    return max(1, min(wanted, max(fd_limit - reserve, fd_limit // 2)))


def raise_fd_limit(wanted: int) -> int:
    """Raise the soft open-files limit toward ``wanted`` (never past the hard limit); returns
    the soft limit in force afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target <= soft:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft
    return target
