"""The limits a connection lives by, from ServerSettings, with the connection cap fitted to the
process's open-files limit."""

from __future__ import annotations

import logging
import resource
from dataclasses import dataclass

from router.settings import ServerSettings

log = logging.getLogger("router.http")

# Files the router needs besides client connections: database pools, logs, the listening socket.
FD_RESERVE = 256


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout_s: float
    max_header_bytes: int
    body_idle_timeout_s: float
    body_min_bytes_per_s: int
    max_connections: int


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


def connection_limits(server: ServerSettings) -> ConnectionLimits:
    """The limits of this process; raises its open-files limit as far as the cap needs."""
    fd_limit = raise_fd_limit(server.max_connections + FD_RESERVE)
    cap = connection_cap(server.max_connections, fd_limit)
    if cap < server.max_connections:
        log.warning(
            "the open-files limit (%d) allows %d client connections, not max_connections %d",
            fd_limit,
            cap,
            server.max_connections,
        )
    return ConnectionLimits(
        header_timeout_s=server.header_timeout_s,
        max_header_bytes=server.max_header_bytes,
        body_idle_timeout_s=server.body_idle_timeout_s,
        body_min_bytes_per_s=server.body_min_bytes_per_s,
        max_connections=cap,
    )
