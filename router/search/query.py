"""Search queries as validated values. Everything that can be refused is refused here, with a
400 naming the parameter."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, fields, is_dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal

from router.db.names import Kind
from router.errors import BadRequest, excerpt
from router.timestamps import TimestampError, parse_rfc3339

Match = Literal["substring", "regex", "iregex"]
Order = Literal["asc", "desc"]


def _fields(value: Any) -> dict[str, Any]:
    """``dataclasses.asdict`` of a query, without its deep copy of every value: the queries
    are frozen, and this runs for every page (the cursor's binding)."""
    return {
        field.name: _fields(item) if is_dataclass(item) else item
        for field in fields(value)
        for item in (getattr(value, field.name),)
    }


@dataclass(frozen=True)
class Window:
    """The half-open time range [start, end)."""

    start: datetime
    end: datetime

    def days(self) -> list[date]:
        first = self.start.astimezone(UTC).date()
        last = (self.end - timedelta(microseconds=1)).astimezone(UTC).date()
        return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def parse_time(value: str, field: str) -> datetime:
    try:
        return parse_rfc3339(value)
    except TimestampError as exc:
        raise BadRequest(f"{excerpt(value)} {exc}", field) from None


def window(start: str, end: str, max_days: int) -> Window:
    begin, finish = parse_time(start, "from"), parse_time(end, "to")
    if finish <= begin:
        raise BadRequest("to must be after from", "to")
    if finish - begin > timedelta(days=max_days):
        raise BadRequest(f"the range spans more than {max_days} days", "to")
    return Window(begin, finish)


@dataclass(frozen=True)
class Keys:
    """The owners (audit) or switches (flows) a search covers: those listed, and those whose key
    starts with ``prefix``; with neither, every one the caller's token may reach. Listed keys
    are kept sorted and unique: the same set is the same query (and takes the same cursors)."""

    listed: tuple[str, ...] = ()
    prefix: str | None = None

    @classmethod
    def of(cls, listed: Iterable[str] = (), prefix: str | None = None) -> Keys:
        return cls(tuple(sorted(set(listed))), prefix)

    @property
    def expands(self) -> bool:
        """Whether the catalog decides which keys are covered (a prefix, or no key at all)."""
        return self.prefix is not None or not self.listed


@dataclass(frozen=True)
class AuditQuery:
    owners: Keys
    window: Window
    patterns: tuple[str, ...]
    match: Match
    order: Order

    def binding(self) -> dict[str, Any]:
        return {"kind": "audit", **_fields(self)}


@dataclass(frozen=True)
class IpFilter:
    network: str  # canonical: '10.1.0.0/16', '2001:db8::1/128'
    exact: bool

    @classmethod
    def parse(cls, value: str, field: str) -> IpFilter:
        try:
            if "/" in value:
                network = ipaddress.ip_network(value.strip(), strict=False)
                return cls(str(network), network.num_addresses == 1)
            address = ipaddress.ip_address(value.strip())
            return cls(f"{address}/{address.max_prefixlen}", True)
        except ValueError:
            raise BadRequest(
                f"{excerpt(value)} is not an IP address or CIDR prefix", field
            ) from None

    @property
    def version(self) -> int:
        return ipaddress.ip_network(self.network).version


@dataclass(frozen=True)
class PortFilter:
    low: int
    high: int

    @classmethod
    def parse(cls, value: str, field: str) -> PortFilter:
        low_text, _, high_text = value.strip().partition("-")
        try:
            low = int(low_text)
            high = int(high_text) if high_text else low
        except ValueError:
            raise BadRequest(
                f"{excerpt(value)} is not a port or a range like 1000-2000", field
            ) from None
        if not 0 <= low <= high <= 65535:
            raise BadRequest("ports are 0-65535 and a range runs low-high", field)
        return cls(low, high)


@dataclass(frozen=True)
class FlowQuery:
    switches: Keys
    window: Window
    src_ip: IpFilter | None
    dst_ip: IpFilter | None
    src_port: PortFilter | None
    dst_port: PortFilter | None
    ip_version: int | None
    proto: int | None
    either_direction: bool
    order: Order

    def binding(self) -> dict[str, Any]:
        return {"kind": "flow", **_fields(self)}


def check_patterns(patterns: list[str], max_patterns: int, max_chars: int) -> tuple[str, ...]:
    if len(patterns) > max_patterns:
        raise BadRequest(f"at most {max_patterns} patterns", "q")
    for pattern in patterns:
        if not pattern:
            raise BadRequest("an empty pattern matches everything; leave q out instead", "q")
        if len(pattern) > max_chars:
            raise BadRequest(f"a pattern is longer than {max_chars} characters", "q")
        if "\x00" in pattern:
            raise BadRequest("a pattern contains a NUL character", "q")
    return tuple(patterns)


def check_ip_versions(query: FlowQuery) -> None:
    versions = {f.version for f in (query.src_ip, query.dst_ip) if f is not None}
    if query.ip_version is not None:
        versions.add(query.ip_version)
    if len(versions) > 1:
        raise BadRequest("the filters mix IPv4 and IPv6 and can match nothing", "ip_version")


def covered_keys(query: AuditQuery | FlowQuery) -> tuple[Kind, Keys]:
    """The kind of owner a query reads and which of them it covers."""
    if isinstance(query, AuditQuery):
        return "audit", query.owners
    return "flow", query.switches
