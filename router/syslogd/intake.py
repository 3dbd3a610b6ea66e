"""One syslog message from its frame to an audit row of its sender's tenant: its sender checked
against the allowed networks and given its tenant (router/syslogd/senders.py; an unknown sender
is refused), the message parsed, given its owner, held to the audit rules. Whatever is refused
is counted by reason and logged at most once per LOG_EVERY_S per reason (a sender of garbage
must not flood the log); nothing here raises on what a sender sends."""

from __future__ import annotations

import logging
import time
from collections import Counter as Tally
from collections.abc import Callable
from datetime import datetime
from zoneinfo import ZoneInfo

from prometheus_client import Counter, Gauge

from router import clock
from router.ingest.records import AuditRow, Limits
from router.metrics import Metrics
from router.protocols import shipped, syslog
from router.senders import SenderNetworks
from router.settings import SyslogSettings
from router.syslogd.queue import Pending
from router.syslogd.senders import Peer, SenderDirectory

log = logging.getLogger("syslog")

PROTOCOL = "syslog"
LOG_EVERY_S = 10.0
# A fresh set of limits now and then: their cache of valid owners grows with every new owner.
LIMITS_KEYS = 10_000


class SyslogMetrics:
    """The router's shipper counters (protocol="syslog") and the listener's own, in one
    registry served on the listener's /metrics."""

    def __init__(self, metrics: Metrics) -> None:
        self.base = metrics
        self.registry = metrics.registry
        self.refused = Counter(
            "shardlog_syslog_refused_messages",
            "Syslog messages refused before the queue, by reason",
            ["reason"],
            registry=self.registry,
        )
        self.queued = Gauge(
            "shardlog_syslog_queued_messages",
            "Messages waiting for the database",
            registry=self.registry,
        )
        self.quarantined = Counter(
            "shardlog_syslog_quarantined_messages",
            "Messages of unknown senders written as the quarantine tenant",
            registry=self.registry,
        )
        self.connections = Gauge(
            "shardlog_syslog_connections",
            "Open TCP, TLS and RELP connections",
            registry=self.registry,
        )

    def count(self, outcome: str, amount: int = 1) -> None:
        """accepted (committed), rejected (refused) or dropped (no room: UDP)."""
        self.base.protocol_messages.labels(PROTOCOL, outcome).inc(amount)

    def read(self, size: int) -> None:
        self.base.protocol_bytes.labels(PROTOCOL).inc(size)


class Throttled:
    """Log lines per reason, at most one per ``every_s``, naming how many were held back."""

    def __init__(self, every_s: float = LOG_EVERY_S) -> None:
        self._every_s = every_s
        self._last: dict[str, float] = {}
        self._held: Tally[str] = Tally()

    def warning(self, reason: str, text: str) -> None:
        now = time.monotonic()
        if now - self._last.get(reason, -self._every_s) < self._every_s:
            self._held[reason] += 1
            return
        held = self._held.pop(reason, 0)
        self._last[reason] = now
        more = f" ({held} more since the last such line)" if held else ""
        log.warning("syslog: %s: %s%s", reason, text, more)


class Intake:
    def __init__(
        self, settings: SyslogSettings, limits: Callable[[], Limits], metrics: SyslogMetrics
    ) -> None:
        self._rules = syslog.owner_rules(settings.owner_rule)
        self._zone = ZoneInfo(settings.zone_3164)
        self._senders = SenderNetworks(settings.allowed_networks)
        self._quarantine = settings.quarantine_tenant
        # Replaced whole when the mappings are reloaded (router/syslogd/service.py).
        self.directory = SenderDirectory([], self._quarantine)
        self.max_bytes = settings.max_message_bytes
        self._new_limits = limits
        self._limits = limits()
        self.metrics = metrics
        self.throttled = Throttled()

    def allows(self, address: str) -> bool:
        """Whether the address is in the allowed networks: checked as a connection is accepted,
        before its TLS handshake (``admits`` checks the mapping, a certificate's maybe, after)."""
        return self._senders.allows(address)

    def admits(self, peer: Peer, what: str) -> bool:
        """Whether a connection (or datagram) of the peer is read at all; refused and counted
        when not."""
        if not self._senders.allows(peer.address):
            self.refuse(peer.describe(), "not allowed", what)
            return False
        if self.directory.tenant_of(peer) is None:
            self.refuse(peer.describe(), "unknown sender", f"{what}: no syslog-senders mapping")
            return False
        return True

    def pending(self, data: bytes, peer: Peer, now: datetime | None = None) -> Pending | None:
        """The message as a row of its sender's tenant, or None (refused, counted). The tenant
        is looked up for each message: a mapping removed ends an open connection's writes."""
        known = self.directory.known(peer)
        tenant = self._quarantine if known is None else known
        if tenant is None:
            self.metrics.read(len(data))
            self.refuse(peer.describe(), "unknown sender", "no syslog-senders mapping")
            return None
        row = self.row(data, peer.address, now)
        if row is None:
            return None
        if known is None:
            self.metrics.quarantined.inc()
        return Pending(row, tenant)

    def refuse(self, sender: str, reason: str, detail: str, count: int = 1) -> None:
        self.metrics.refused.labels(reason).inc(count)
        self.metrics.count("rejected", count)
        self.throttled.warning(reason, f"from {sender}: {detail}")

    def row(self, data: bytes, sender: str, now: datetime | None = None) -> AuditRow | None:
        """The message as an audit row, or None (refused, counted)."""
        self.metrics.read(len(data))
        if len(data) > self.max_bytes:
            self.refuse(sender, "oversize", f"{len(data)} bytes, more than {self.max_bytes}")
            return None
        now = clock.now() if now is None else now
        try:
            parsed = syslog.parse(data, now, self._zone)
        except syslog.SyslogError as exc:
            self.refuse(sender, exc.reason, f"{exc}: {data[:120]!r}")
            return None
        message = syslog.message(parsed, self._rules, now)
        if len(self._limits.valid_keys) > LIMITS_KEYS:
            self._limits = self._new_limits()
        checked = shipped.check([message], PROTOCOL, self._limits, now)
        if checked.refused:
            reason = "no owner" if message.owner is None else "refused by the audit rules"
            self.refuse(sender, reason, f"{checked.refused[0][1].message}: {data[:120]!r}")
            return None
        return checked.rows[0]
