"""Which stream connections (TCP, TLS, RELP) the listener keeps: at most ``max_connections`` in
all, fitted to the open-files limit so that accepting does not run out of files and the
listener keeps some for its pools and its /health, and at most ``max_per_source`` from one
address, so that one sender cannot take every place. A connection over either cap is closed as
soon as it is accepted (before any TLS handshake), counted by reason."""

from __future__ import annotations

import logging
from collections import Counter as Tally
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter

from router.open_files import FD_RESERVE, connection_cap, raise_fd_limit
from router.settings import SyslogSettings

log = logging.getLogger("syslog")

OVER_CAP = "connection cap"
OVER_SOURCE_CAP = "source connection cap"


@dataclass(frozen=True)
class StreamLimits:
    max_connections: int
    max_per_source: int
    idle_timeout_s: float
    accept_retry_s: float
    accept_retry_max_s: float


def stream_limits(settings: SyslogSettings) -> StreamLimits:
    """The limits of this process; raises its open-files limit as far as the cap needs."""
    fd_limit = raise_fd_limit(settings.max_connections + FD_RESERVE)
    cap = connection_cap(settings.max_connections, fd_limit)
    if cap < settings.max_connections:
        log.warning(
            "syslog: the open-files limit (%d) allows %d connections, not max_connections %d",
            fd_limit,
            cap,
            settings.max_connections,
        )
    return StreamLimits(
        max_connections=cap,
        max_per_source=settings.max_connections_per_source,
        idle_timeout_s=settings.idle_timeout_s,
        accept_retry_s=settings.accept_retry_s,
        accept_retry_max_s=max(settings.accept_retry_s, settings.accept_retry_max_s),
    )


class Admission:
    """The open connections, in all and per source address."""

    def __init__(self, max_connections: int, max_per_source: int) -> None:
        self._max = max_connections
        self._max_per_source = max_per_source
        self._open: Tally[str] = Tally()
        self.total = 0

    def admit(self, source: str) -> str | None:
        """None when the connection may stay (counted until ``release``), else why not."""
        if self.total >= self._max:
            return OVER_CAP
        if self._open[source] >= self._max_per_source:
            return OVER_SOURCE_CAP
        self._open[source] += 1
        self.total += 1
        return None

    def release(self, source: str) -> None:
        self.total -= 1
        self._open[source] -= 1
        if not self._open[source]:
            del self._open[source]


class ConnectionMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.refused = Counter(
            "shardlog_syslog_refused_connections",
            "TCP, TLS and RELP connections closed as soon as accepted, by reason",
            ["reason"],
            registry=registry,
        )
        self.idle_closed = Counter(
            "shardlog_syslog_idle_closed_connections",
            "Connections closed after idle_timeout_s without data",
            registry=registry,
        )
        self.accept_pauses = Counter(
            "shardlog_syslog_accept_pauses",
            "Pauses of accepting: the process was out of files or memory",
            registry=registry,
        )
