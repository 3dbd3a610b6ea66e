"""Validation of single audit and flow records into the tuples the writers COPY.

Pure: no I/O. Every error is an Invalid naming the record and field, e.g. ``records[12].ts``
or, for CSV, ``lines[7].src_ip``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import orjson

from router.catalog.rules import owner_key_problem
from router.db.inet import encode_address, version_of
from router.errors import Invalid, excerpt
from router.timestamps import TimestampError, parse_rfc3339

AUDIT_FIELDS = frozenset({"owner", "ts", "content", "attrs"})
FLOW_FIELDS = frozenset(
    {
        "switch",
        "ts",
        "src_ip",
        "dst_ip",
        "src_port",
        "dst_port",
        "ip_version",
        "proto",
        "bytes",
        "packets",
        "tcp_flags",
        "sampling_rate",
    }
)
MAX_BIGINT = 2**63 - 1
MAX_INTEGER = 2**31 - 1


class AuditRow(NamedTuple):
    position: int
    owner: str
    ts: datetime
    content: str
    attrs: str | None


class FlowRow(NamedTuple):
    position: int
    switch: str
    ts: datetime
    src_ip: bytes
    dst_ip: bytes
    src_port: int
    dst_port: int
    ip_version: int
    proto: int | None
    bytes: int
    packets: int
    # From flow exporters (router/collector); REST records have none: ts is both ends.
    last_seen: datetime | None = None
    tcp_flags: int | None = None
    sampling_rate: int | None = None


class FlowKey(NamedTuple):
    src_ip: bytes
    dst_ip: bytes
    src_port: int
    dst_port: int
    proto: int | None


@dataclass
class Limits:
    max_content_bytes: int
    max_attrs_bytes: int
    max_owner_chars: int
    future_skew: timedelta
    max_attrs_depth: int = 32
    # The ts of records that have none: now, or the first attempt's now on a keyed retry.
    default_ts: datetime | None = None
    # Keys already found valid: most requests repeat a few owners over many records.
    valid_keys: set[str] = field(default_factory=set)


class Location:
    """Where a record came from, for error messages: records[i] or lines[n]."""

    __slots__ = ("label", "number")

    def __init__(self, label: str, number: int) -> None:
        self.label = label
        self.number = number

    def field(self, name: str) -> str:
        return f"{self.label}[{self.number}].{name}"

    def error(self, name: str, message: str) -> Invalid:
        return Invalid(f"{self.label}[{self.number}]: {name} {message}", self.field(name))


def _check_fields(raw: Any, allowed: frozenset[str], where: Location) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise Invalid(
            f"{where.label}[{where.number}] is not a JSON object", f"{where.label}[{where.number}]"
        )
    if not raw.keys() <= allowed:
        name = sorted(raw.keys() - allowed)[0]
        raise where.error(name, "is not a known field")
    return raw


def check_key(value: Any, name: str, where: Location, limits: Limits) -> str:
    if type(value) is str and value in limits.valid_keys:
        return value
    problem = owner_key_problem(value, limits.max_owner_chars)
    if problem is not None:
        raise where.error(name, problem)
    if len(limits.valid_keys) < 10_000:
        limits.valid_keys.add(value)
    return str(value)


def parse_ts(value: Any, where: Location, now: datetime, limits: Limits) -> datetime:
    if value is None:
        return limits.default_ts or now
    if not isinstance(value, str):
        raise where.error("ts", "must be an RFC 3339 string")
    try:
        ts = parse_rfc3339(value)
    except TimestampError as exc:
        raise where.error("ts", f"{excerpt(value)} {exc}") from None
    return check_ts(ts, where, now, limits)


def check_ts(ts: datetime, where: Location, now: datetime, limits: Limits) -> datetime:
    """A timestamp (timezone-aware) no further in the future than the limits allow."""
    if ts - now > limits.future_skew:
        raise where.error(
            "ts", f"is more than {limits.future_skew.total_seconds():.0f}s in the future"
        )
    return ts


def attrs_text(attrs: Any, where: Location, limits: Limits) -> str:
    if not isinstance(attrs, dict):
        raise where.error("attrs", "must be a JSON object")
    try:
        encoded = orjson.dumps(attrs)
    except orjson.JSONEncodeError:
        # orjson refuses to nest deeper than 254 levels; far past the limit either way.
        raise where.error("attrs", f"nests deeper than {limits.max_attrs_depth} levels") from None
    if len(encoded) > limits.max_attrs_bytes:
        raise where.error("attrs", f"is longer than {limits.max_attrs_bytes} bytes")
    # Only a text with that many brackets can nest that deep: most attrs skip the walk.
    if encoded.count(b"{") + encoded.count(b"[") > limits.max_attrs_depth and (
        nesting_depth(attrs) > limits.max_attrs_depth
    ):
        raise where.error("attrs", f"nests deeper than {limits.max_attrs_depth} levels")
    if b"\\u0000" in encoded:
        raise where.error("attrs", "contains a NUL character")
    return encoded.decode()


def nesting_depth(value: Any) -> int:
    """Levels of objects and arrays in a decoded JSON value (a scalar is 0)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


def audit_row(raw: Any, where: Location, now: datetime, limits: Limits) -> AuditRow:
    record = _check_fields(raw, AUDIT_FIELDS, where)
    return checked_audit_row(
        record.get("owner"),
        parse_ts(record.get("ts"), where, now, limits),
        record.get("content"),
        record.get("attrs"),
        where,
        limits,
    )


def checked_audit_row(
    owner: Any, ts: datetime, content: Any, attrs: Any, where: Location, limits: Limits
) -> AuditRow:
    """An audit row of values already decoded (a REST record's, or a log shipper's message:
    router/protocols), held to the same rules; ``ts`` was parsed (see ``check_ts``)."""
    owner = check_key(owner, "owner", where, limits)
    if not isinstance(content, str):
        raise where.error("content", "must be a string")
    if len(content) * 4 > limits.max_content_bytes and (
        len(content.encode()) > limits.max_content_bytes
    ):
        raise where.error("content", f"is longer than {limits.max_content_bytes} bytes")
    if "\x00" in content:
        raise where.error("content", "contains a NUL character")
    text = None if attrs is None else attrs_text(attrs, where, limits)
    return AuditRow(where.number, owner, ts, content, text)


def _int(value: Any, name: str, where: Location, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.error(name, "must be an integer (a JSON number)")
    if not low <= value <= high:
        raise where.error(name, f"must be between {low} and {high}")
    return value


def _address(value: Any, name: str, where: Location) -> bytes:
    if not isinstance(value, str):
        raise where.error(name, "must be an IP address string")
    try:
        return encode_address(value.strip())
    except ValueError as exc:
        raise where.error(name, str(exc)) from None


def flow_row(raw: Any, where: Location, now: datetime, limits: Limits) -> FlowRow:
    record = _check_fields(raw, FLOW_FIELDS, where)
    switch = check_key(record.get("switch"), "switch", where, limits)
    ts = parse_ts(record.get("ts"), where, now, limits)
    src = _address(record.get("src_ip"), "src_ip", where)
    dst = _address(record.get("dst_ip"), "dst_ip", where)
    version = version_of(src)
    if version_of(dst) != version:
        raise where.error("dst_ip", f"is not IPv{version} like src_ip")
    declared = record.get("ip_version")
    if declared is not None and (type(declared) is not int or declared not in (4, 6)):
        raise where.error("ip_version", "must be 4 or 6")
    if declared is not None and declared != version:
        raise where.error("ip_version", f"says {declared} but the addresses are IPv{version}")
    proto = record.get("proto")
    flags = record.get("tcp_flags")
    rate = record.get("sampling_rate")
    return FlowRow(
        where.number,
        switch,
        ts,
        src,
        dst,
        _int(record.get("src_port"), "src_port", where, 0, 65535),
        _int(record.get("dst_port"), "dst_port", where, 0, 65535),
        version,
        None if proto is None else _int(proto, "proto", where, 0, 255),
        _int(record.get("bytes"), "bytes", where, 0, MAX_BIGINT),
        _int(record.get("packets", 0), "packets", where, 0, MAX_BIGINT),
        tcp_flags=None if flags is None else _int(flags, "tcp_flags", where, 0, 255),
        sampling_rate=None if rate is None else _int(rate, "sampling_rate", where, 1, MAX_INTEGER),
    )
