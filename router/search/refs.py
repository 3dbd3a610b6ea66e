"""Row permalinks. A ``ref`` names one stored row: its kind, its owner's catalog id, its shard,
its day, its id, and what finds it by an index: an audit row's ts (the (ts, id) index), a flow's
5-tuple (its unique key; first_seen moves when records merge into the flow, the 5-tuple and the
id do not). Packed and base64url-encoded: URL-safe, opaque, stable. Not signed: whoever fetches
a ref passes the same access check as a search of its owner. Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from router.compaction import layout
from router.db.names import DayTable, Kind, day_table
from router.errors import BadRequest
from router.search import sql

_VERSION = 1
_KIND_CODE: dict[Kind, int] = {"audit": 1, "flow": 2}
_HEAD = struct.Struct(">BBqiqB")  # version, kind, owner id, day (ordinal), row id, shard length
_HEAD_START = struct.Struct(">BBq")  # what of the head one day table's rows share
_AUDIT_TAIL = struct.Struct(">q")  # ts in microseconds since 1970
_FLOW_TAIL = struct.Struct(">HHh")  # ports, proto (-1: none)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_BASE64URL = re.compile(r"^[A-Za-z0-9_-]+$")
# Longer than any ref issued (168 characters: a flow of two IPv6 addresses on a shard with a
# 63-character name).
MAX_REF_CHARS = 200
_FIRST_DAY, _LAST_DAY = date(1000, 1, 1), date(9999, 12, 31)  # day tables name 8-digit dates
_ROUTE = {"audit": "/v1/audit/rows/{ref}", "flow": "/v1/flows/rows/{ref}"}


@dataclass(frozen=True)
class FlowKey:
    src_ip: str
    dst_ip: str
    src_port: int
    dst_port: int
    proto: int | None


@dataclass(frozen=True)
class RowRef:
    kind: Kind
    owner_id: int
    shard: str
    day: date
    id: int
    ts: datetime | None = None  # audit rows
    flow: FlowKey | None = None  # flows

    @property
    def table(self) -> DayTable:
        return day_table(self.kind, self.owner_id, self.day)


def _not_a_ref() -> BadRequest:
    return BadRequest("ref is not a row reference this service issued", "ref")


def _micros(ts: datetime) -> int:
    return (ts - _EPOCH) // timedelta(microseconds=1)


def encode(ref: RowRef) -> str:
    shard = ref.shard.encode("ascii")
    packed = _HEAD.pack(
        _VERSION, _KIND_CODE[ref.kind], ref.owner_id, ref.day.toordinal(), ref.id, len(shard)
    )
    if ref.ts is not None:
        tail = _AUDIT_TAIL.pack(_micros(ref.ts))
    else:
        assert ref.flow is not None
        flow = ref.flow
        tail = b"".join(
            bytes([len(address)]) + address
            for address in (
                ipaddress.ip_address(flow.src_ip).packed,
                ipaddress.ip_address(flow.dst_ip).packed,
            )
        ) + _FLOW_TAIL.pack(flow.src_port, flow.dst_port, -1 if flow.proto is None else flow.proto)
    return base64.urlsafe_b64encode(packed + shard + tail).decode().rstrip("=")


def of_row(kind: Kind, owner_id: int, row: dict[str, Any]) -> str:
    """The ref of a row as search reads it (``ts`` is first_seen for flows)."""
    day = row["ts"].astimezone(UTC).date()
    if kind == "audit":
        # What encode makes of the RowRef, without making one: a page makes a ref per row.
        shard = row["shard"].encode("ascii")
        head = _HEAD.pack(_VERSION, 1, owner_id, day.toordinal(), row["id"], len(shard))
        packed = head + shard + _AUDIT_TAIL.pack(_micros(row["ts"]))
        return base64.urlsafe_b64encode(packed).decode().rstrip("=")
    flow = FlowKey(row["src_ip"], row["dst_ip"], row["src_port"], row["dst_port"], row["proto"])
    return encode(RowRef(kind, owner_id, row["shard"], day, row["id"], flow=flow))


def ref_sql(kind: Kind, owner_id: int | None, shard: str, add: Callable[[Any], str]) -> str:
    """SQL that makes the ref of each row of ``owner_id``'s day table on ``shard`` (None: of
    rows that name their owner in their ``owner_id`` column, a shard-day's), as ``of_row``
    does (the same bytes, base64url without padding), for exports rendered on the shards;
    ``add`` makes a parameter of a value. Reads ts (audit) or first_seen, id and the 5-tuple
    of the row."""
    column = "ts" if kind == "audit" else "first_seen"
    if owner_id is None:
        start = f"{add(bytes([_VERSION, _KIND_CODE[kind]]))}::bytea || int8send(owner_id)"
    else:
        start = f"{add(_HEAD_START.pack(_VERSION, _KIND_CODE[kind], owner_id))}::bytea"
    name = shard.encode("ascii")
    named = add(bytes([len(name)]) + name)
    day = f"int4send(({column} AT TIME ZONE 'UTC')::date - DATE '0001-01-01' + 1)"
    parts = [start, day, "int8send(id)", f"{named}::bytea"]
    if kind == "audit":
        parts.append("int8send((extract(epoch FROM ts) * 1000000)::bigint)")
    else:
        # inet's binary form from its 4th byte: the address's length, then its bytes.
        parts += [
            "substring(inet_send(src_ip) FROM 4)",
            "substring(inet_send(dst_ip) FROM 4)",
            "substring(int4send(src_port) FROM 3)",
            "substring(int4send(dst_port) FROM 3)",
            "int2send(coalesce(proto, -1::smallint))",
        ]
    # encode() writes base64 with a newline every 76 characters.
    base64 = f"encode({' || '.join(parts)}, 'base64')"
    return f"rtrim(replace(replace(replace({base64}, E'\\n', ''), '+', '-'), '/', '_'), '=')"


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._at = 0

    def take(self, size: int) -> bytes:
        if self._at + size > len(self._data):
            raise ValueError("short")
        chunk = self._data[self._at : self._at + size]
        self._at += size
        return chunk

    def unpack(self, layout: struct.Struct) -> tuple[Any, ...]:
        return layout.unpack(self.take(layout.size))

    def address(self) -> str:
        size = self.take(1)[0]
        if size not in (4, 16):
            raise ValueError("address")
        # As router/db/inet.py renders what a search reads.
        return socket.inet_ntop(socket.AF_INET if size == 4 else socket.AF_INET6, self.take(size))

    def finished(self) -> bool:
        return self._at == len(self._data)


def decode(text: str, kind: Kind) -> RowRef:
    """The row a ref names; 400 naming ``ref`` for anything this module did not make, and for
    a ref of the other kind of row."""
    if len(text) > MAX_REF_CHARS or not _BASE64URL.match(text):
        raise _not_a_ref()
    try:
        reader = _Reader(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        version, code, owner_id, ordinal, ident, shard_length = reader.unpack(_HEAD)
        shard = reader.take(shard_length).decode("ascii")
        day = date.fromordinal(ordinal)
        ts = flow = None
        if code == _KIND_CODE["audit"]:
            (micros,) = reader.unpack(_AUDIT_TAIL)
            ts = _EPOCH + timedelta(microseconds=micros)
        elif code == _KIND_CODE["flow"]:
            src_ip, dst_ip = reader.address(), reader.address()
            src_port, dst_port, proto = reader.unpack(_FLOW_TAIL)
            flow = FlowKey(src_ip, dst_ip, src_port, dst_port, None if proto == -1 else proto)
    except (binascii.Error, struct.error, ValueError, OverflowError):
        raise _not_a_ref() from None
    valid = (
        version == _VERSION
        and reader.finished()
        and owner_id >= 1
        and shard
        and _FIRST_DAY <= day <= _LAST_DAY
        and (ts is None or ts.date() == day)
        and (flow is None or flow.proto is None or 0 <= flow.proto <= 255)
        and (ts is not None or flow is not None)
    )
    if not valid:
        raise _not_a_ref()
    found: Kind = "audit" if ts is not None else "flow"
    if found != kind:
        what = "an audit row" if found == "audit" else "a flow"
        raise BadRequest(f"ref names {what}: fetch it with GET {_ROUTE[found]}", "ref")
    return RowRef(kind, owner_id, shard, day, ident, ts=ts, flow=flow)


def point_sql(ref: RowRef) -> tuple[str, list[Any]]:
    """The row, read by an index of its day table; values travel as parameters."""
    return _point_sql(ref, ref.table.quoted, "")


def shared_point_sql(ref: RowRef) -> tuple[str, list[Any]]:
    """The row in the shared table of its shard and day, by the owner's index there. Read
    before the owner's own table: a promotion moves rows from the one to the other, never
    back, so a row not found here (moved since) is found there."""
    return _point_sql(ref, ref.table.shared_quoted, f"owner_id = {int(ref.owner_id)} AND ")


def _point_sql(ref: RowRef, table: str, owner: str) -> tuple[str, list[Any]]:
    if ref.ts is not None:
        return (
            f"SELECT {sql.AUDIT_COLUMNS} FROM {table} WHERE {owner}ts = $1 AND id = $2",
            [ref.ts, ref.id],
        )
    assert ref.flow is not None
    flow = ref.flow
    params: list[Any] = [flow.src_ip, flow.dst_ip, flow.src_port, flow.dst_port, ref.id]
    proto = "proto IS NULL"
    if flow.proto is not None:
        params.append(flow.proto)
        proto = "proto = $6"
    return (
        f"SELECT {sql.FLOW_COLUMNS} FROM {table} WHERE {owner}src_ip = $1::inet "
        "AND dst_ip = $2::inet "
        f"AND src_port = $3 AND dst_port = $4 AND {proto} AND id = $5",
        params,
    )


# The range of the instant $1 alone: a segment's other rows are not built.
ONE_INSTANT = ("$1::timestamptz", "$1::timestamptz + interval '1 microsecond'")


def segment_point_sql(ref: RowRef) -> tuple[str, list[Any]] | None:
    """A row of a compacted owner-day once its heap row is cleared. An audit row: from the one
    segment whose (first, last) bounds hold its (ts, id). A flow (a ref holds no instant): from
    the segments, or the heap in the same statement, since a late merge may have moved it
    back there (router/compaction/unfold.py) after point_sql looked."""
    table = ref.table
    if ref.ts is None:
        heap, params = point_sql(ref)
        flow = ref.flow
        assert flow is not None
        proto = "u.proto IS NULL" if flow.proto is None else "u.proto = $6"
        packed = (
            f"SELECT {sql.FLOW_COLUMNS} FROM {layout.segments(table)} "
            f"WHERE {layout.owned(table)} AND u.src_ip = $1::inet AND u.dst_ip = $2::inet "
            f"AND u.src_port = $3 AND u.dst_port = $4 AND {proto} AND u.id = $5"
        )
        return f"({heap}) UNION ALL ({packed}) LIMIT 1", params
    return (
        f"SELECT u.ts, u.id, u.content, u.attrs FROM {layout.segments(table, ONE_INSTANT)} "
        f"WHERE {layout.owned(table)} AND (s.first_ts, s.first_id) <= ($1, $2) "
        "AND (s.last_ts, s.last_id) >= ($1, $2) AND u.ts = $1 AND u.id = $2",
        [ref.ts, ref.id],
    )


def shared_segment_point_sql(ref: RowRef) -> tuple[str, list[Any]] | None:
    """An audit row of a compacted shard-day once the shared table's row is cleared: from the
    shared segments holding its owner whose bounds hold its ts."""
    if ref.ts is None:
        return None  # flows are not written shared
    table = ref.table
    return (
        f"SELECT u.ts, u.id, u.content, u.attrs "
        f"FROM {layout.shared_segments(table, ONE_INSTANT)} "
        f"WHERE {layout.shared_holding(table.owner_id)} AND s.first_ts <= $1 "
        f"AND s.last_ts >= $1 AND u.ts = $1 AND u.id = $2 "
        f"AND {layout.shared_owner_at()} = {int(table.owner_id)}",
        [ref.ts, ref.id],
    )
