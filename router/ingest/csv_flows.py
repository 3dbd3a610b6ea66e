"""Flow CSV bodies: ``src_ip,dst_ip,src_port,dst_port[,ip_type]`` per line, or any columns in
any order under a header row. Header names are matched case-insensitively, with spaces, '_' and
'-' alike, and the usual spellings of exported flow files (``Source Address``, ``Destination
Port``, ``Protocol``, ``Bytes``, ``TCP Flags``, ``Sampling Rate``, ...). A ``switch`` column
lets one body carry several switches; the ``?switch=`` parameter is the switch of rows that
name none. LF or CRLF, final newline optional. Rows are numbered by physical line (from 1) and
errors name ``lines[N]``.

Only text is turned into values here (ASCII digits into ints, protocol names into numbers);
what the values may be is checked by records.flow_row, as for JSON.
"""

from __future__ import annotations

import csv
import re
from collections.abc import AsyncIterator
from typing import Any

from router.db.inet import encode_address
from router.errors import Invalid, excerpt
from router.ingest.body import Batch, Body, LineTooLong, lines, too_long

_SPELLINGS: dict[str, tuple[str, ...]] = {
    "switch": ("switch", "exporter"),
    "src_ip": ("src ip", "src addr", "src address", "srcaddr", "source ip", "source address"),
    "dst_ip": (
        "dst ip",
        "dest ip",
        "dst addr",
        "dst address",
        "dstaddr",
        "destination ip",
        "destination address",
    ),
    "src_port": ("src port", "srcport", "source port"),
    "dst_port": ("dst port", "dest port", "dstport", "destination port"),
    "ip_type": ("ip type", "ip version"),
    "proto": ("proto", "protocol"),
    "bytes": ("bytes", "octets"),
    "packets": ("packets", "pkts"),
    "ts": ("ts", "time", "timestamp"),
    "tcp_flags": ("tcp flags", "flags"),
    "sampling_rate": ("sampling rate", "sampling interval"),
}
COLUMNS = {spelling: name for name, spellings in _SPELLINGS.items() for spelling in spellings}
DEFAULT_LAYOUT = ("src_ip", "dst_ip", "src_port", "dst_port", "ip_type")
REQUIRED = ("src_ip", "dst_ip", "src_port", "dst_port")
_IP_TYPES = {"ipv4": 4, "ipv6": 6, "4": 4, "6": 6}
_PROTOCOLS = {"icmp": 1, "igmp": 2, "tcp": 6, "udp": 17, "gre": 47, "esp": 50, "ah": 51}
_PROTOCOLS |= {"icmpv6": 58, "ipv6-icmp": 58, "sctp": 132}
_INTEGER = re.compile(r"-?[0-9]{1,20}")
_SEPARATORS = re.compile(r"[\s_-]+")
_INTEGER_COLUMNS = frozenset(
    {"src_port", "dst_port", "bytes", "packets", "tcp_flags", "sampling_rate"}
)


def column_of(header: str) -> str | None:
    return COLUMNS.get(_SEPARATORS.sub(" ", header.strip().lower()))


def _is_header(fields: list[str]) -> bool:
    try:
        encode_address(fields[0].strip())
    except ValueError:
        return True
    return False


def _layout(fields: list[str], line: int) -> tuple[str, ...]:
    layout = []
    for number, header in enumerate(fields):
        name = column_of(header)
        if name is None:
            raise Invalid(
                f"lines[{line}]: unknown CSV column {excerpt(header)}; known: "
                + ", ".join(sorted(_SPELLINGS)),
                f"lines[{line}]",
            )
        if name in layout:
            raise Invalid(
                f"lines[{line}]: column {number + 1} ({excerpt(header)}) repeats {name}",
                f"lines[{line}]",
            )
        layout.append(name)
    missing = [c for c in REQUIRED if c not in layout]
    if missing:
        raise Invalid(f"lines[{line}]: CSV header lacks {', '.join(missing)}", f"lines[{line}]")
    return tuple(layout)


def _integer(value: str, name: str, line: int) -> int:
    if not _INTEGER.fullmatch(value):
        raise Invalid(
            f"lines[{line}]: {name} {excerpt(value)} is not an integer", f"lines[{line}].{name}"
        )
    return int(value)


def _value(name: str, value: str, line: int) -> Any:
    if name in _INTEGER_COLUMNS:
        return _integer(value, name, line)
    if name == "proto":
        number = _PROTOCOLS.get(value.lower())
        return number if number is not None else _integer(value, name, line)
    if name == "ip_type":
        version = _IP_TYPES.get(value.lower())
        if version is None:
            raise Invalid(
                f"lines[{line}]: ip_type {excerpt(value)} is not IPv4 or IPv6",
                f"lines[{line}].ip_type",
            )
        return version
    return value


def record_of(
    fields: list[str], layout: tuple[str, ...], line: int, switch: str | None
) -> dict[str, Any]:
    if len(fields) != len(layout):
        raise Invalid(
            f"lines[{line}] has {len(fields)} columns, expected {len(layout)}", f"lines[{line}]"
        )
    record: dict[str, Any] = {"bytes": 0}
    for name, raw in zip(layout, fields, strict=True):
        value = raw.strip()
        if value or name in REQUIRED:
            record["ip_version" if name == "ip_type" else name] = _value(name, value, line)
    record.setdefault("switch", switch)
    if record["switch"] is None:
        raise Invalid(
            f"lines[{line}] names no switch: add a switch column or ?switch= to the URL",
            f"lines[{line}].switch",
        )
    return record


def _fields(text: str, line: int) -> list[str]:
    try:
        return next(csv.reader([text], strict=True))
    except csv.Error as exc:
        raise Invalid(f"lines[{line}] is not valid CSV: {exc}", f"lines[{line}]") from None


async def csv_flows(body: Body, switch: str | None, max_record_bytes: int) -> AsyncIterator[Batch]:
    layout: tuple[str, ...] | None = None
    line_number = 0
    try:
        async for batch_lines in lines(body, max_record_bytes):
            batch: Batch = []
            for raw in batch_lines:
                line_number += 1
                try:
                    text = raw.decode().rstrip("\r")
                except UnicodeDecodeError:
                    raise Invalid(
                        f"lines[{line_number}] is not UTF-8", f"lines[{line_number}]"
                    ) from None
                if not text.strip():
                    continue
                fields = _fields(text, line_number)
                if layout is None:
                    if _is_header(fields):
                        layout = _layout(fields, line_number)
                        continue
                    layout = DEFAULT_LAYOUT
                # Without a header, ip_type may be left out: it follows from the addresses.
                row_layout = REQUIRED if layout is DEFAULT_LAYOUT and len(fields) == 4 else layout
                batch.append((line_number, record_of(fields, row_layout, line_number, switch)))
            yield batch
    except LineTooLong:
        raise too_long("lines", line_number + 1, max_record_bytes) from None
