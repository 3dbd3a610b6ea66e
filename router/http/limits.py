"""The limits a connection lives by, from ServerSettings, with the connection cap fitted to the
process's open-files limit (router/open_files.py), the room for health checks included."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from router.open_files import FD_RESERVE, connection_cap, raise_fd_limit
from router.settings import ServerSettings

log = logging.getLogger("router.http")


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout_s: float
    max_header_bytes: int
    body_idle_timeout_s: float
    body_min_bytes_per_s: int
    max_connections: int
    health_connections: int


def connection_limits(server: ServerSettings) -> ConnectionLimits:
    """The limits of this process; raises its open-files limit as far as the cap needs."""
    fd_limit = raise_fd_limit(server.max_connections + server.health_connections + FD_RESERVE)
    cap = connection_cap(server.max_connections, fd_limit, FD_RESERVE + server.health_connections)
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
        health_connections=server.health_connections,
    )
