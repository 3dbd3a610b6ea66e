"""NDJSON audit records and flows decoded by msgspec, a block of lines in one C-level pass,
straight into the rows the writer takes: the hot path of REST ingest.

Only a block every line of which the per-line path (orjson, then ``records.audit_row`` or
``records.flow_row``) would accept is taken here, row for row what that path makes of it; a
block with anything else in it (a blank line, an unknown field, a bad value) is handed back,
and the per-line path takes it and names the record and field at fault. So this module never
decides what is invalid and never words an error: it only makes valid blocks cheaper.

Lines become the elements of one JSON array (``[`` + the lines joined by commas + ``]``), so
that a block is one call: a newline inside a value or a blank line then leaves two commas in a
row or a comma beside a bracket, which no JSON takes, and a line holding two values shows as
more elements than lines.

Blocks go first to the native decoders (``native/``, Rust, built by ``make install``): they
take only blocks of the common shape (audit records without attrs, flows without spaces
around their addresses, ...) and hand the rest back, which msgspec then takes as above.
Without the extension, msgspec takes them all.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, TypeVar

import msgspec
import orjson

from router.catalog.rules import owner_key_problem
from router.db.inet import encode_address, version_of
from router.errors import Invalid
from router.ingest.records import (
    MAX_BIGINT,
    MAX_INTEGER,
    AuditRow,
    FlowRow,
    Limits,
    Location,
    attrs_text,
)
from router.native import extension as shardlog_native
from router.timestamps import TimestampError, parse_rfc3339

_UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)

# Values out of these ranges fail decoding: the per-line path then words the error.
Port = Annotated[int, msgspec.Meta(ge=0, le=65535)]
Byte = Annotated[int, msgspec.Meta(ge=0, le=255)]
Counter = Annotated[int, msgspec.Meta(ge=0, le=MAX_BIGINT)]
Rate = Annotated[int, msgspec.Meta(ge=1, le=MAX_INTEGER)]

_NULL = msgspec.Raw(b"null")


class _AuditLine(msgspec.Struct, forbid_unknown_fields=True):
    owner: str
    content: str
    ts: str | None = None
    # Kept as JSON text here, then held to records.attrs_text's rules like any other attrs.
    attrs: msgspec.Raw = _NULL


class _FlowLine(msgspec.Struct, forbid_unknown_fields=True):
    switch: str
    src_ip: str
    dst_ip: str
    src_port: Port
    dst_port: Port
    octets: Counter = msgspec.field(name="bytes")
    ts: str | None = None
    ip_version: int | None = None
    proto: Byte | None = None
    packets: Counter = 0
    tcp_flags: Byte | None = None
    sampling_rate: Rate | None = None


_DECODE = msgspec.json.Decoder(list[_AuditLine]).decode
_DECODE_FLOWS = msgspec.json.Decoder(list[_FlowLine]).decode
T = TypeVar("T")
Row = TypeVar("Row", AuditRow, FlowRow)
_FAILURES = (msgspec.MsgspecError, UnicodeDecodeError, RecursionError)


def _lines(decode: Callable[[bytes], list[T]], block: bytes) -> list[T] | None:
    """The block's lines as one JSON array (see above), or None."""
    try:
        # msgspec refuses to nest past its limit with RecursionError.
        lines = decode(b"[" + block.replace(b"\n", b",") + b"]")
    except _FAILURES:
        return None
    return lines if len(lines) == block.count(b"\n") + 1 else None


def _valid_key(key: str, limits: Limits) -> bool:
    if key in limits.valid_keys:
        return True
    if owner_key_problem(key, limits.max_owner_chars) is not None:
        return False
    if len(limits.valid_keys) < 10_000:
        limits.valid_keys.add(key)
    return True


def _ts(text: str | None, default: datetime, latest: datetime) -> datetime | None:
    if text is None:
        return default
    try:
        ts = parse_rfc3339(text)
    except TimestampError:
        return None
    return None if ts > latest else ts


def _latest_micros(now: datetime, limits: Limits) -> int:
    """The latest ts a record may have, in microseconds from the Unix epoch."""
    return (now + limits.future_skew - _UNIX_EPOCH) // _MICROSECOND


def _natively(
    decode: Callable[..., list[Row] | None],
    row_type: type[Row],
    block: bytes,
    first: int,
    now: datetime,
    limits: Limits,
    *options: int,
) -> list[Row] | None:
    """A native decoder's rows of the block (shardlog_native.audit_rows or flow_rows, each
    taking ``options`` before the row type), or None where it hands the block back."""
    return decode(
        block,
        first,
        limits.default_ts or now,
        _latest_micros(now, limits),
        *options,
        row_type,
        lambda key: _valid_key(key, limits),
    )


def audit_rows(block: bytes, first: int, now: datetime, limits: Limits) -> list[AuditRow] | None:
    """The rows of ``block`` (complete NDJSON lines joined by LF, the first numbered
    ``first``), or None when the per-line path must take the block."""
    if shardlog_native is not None:
        decode = shardlog_native.audit_rows
        rows = _natively(decode, AuditRow, block, first, now, limits, limits.max_content_bytes)
        if rows is not None:
            return rows
    return msgspec_audit_rows(block, first, now, limits)


def msgspec_audit_rows(
    block: bytes, first: int, now: datetime, limits: Limits
) -> list[AuditRow] | None:
    """audit_rows without the native decoder: the reference it is held to."""
    lines = _lines(_DECODE, block)
    if lines is None:
        return None
    most_bytes = limits.max_content_bytes
    default_ts = limits.default_ts or now
    latest = now + limits.future_skew
    rows: list[AuditRow] = []
    append = rows.append
    for number, line in enumerate(lines, first):
        owner = line.owner
        if owner not in limits.valid_keys and not _valid_key(owner, limits):
            return None
        ts = _ts(line.ts, default_ts, latest)
        if ts is None:
            return None
        content = line.content
        if len(content) * 4 > most_bytes and len(content.encode()) > most_bytes:
            return None
        if "\x00" in content:
            return None
        attrs = None
        if line.attrs != _NULL:
            try:
                attrs = attrs_text(
                    orjson.loads(memoryview(line.attrs)), Location("", number), limits
                )
            except (orjson.JSONDecodeError, Invalid, RecursionError):
                return None
        append(AuditRow(number, owner, ts, content, attrs))
    return rows


def _address(text: str) -> bytes | None:
    try:
        return encode_address(text.strip())
    except ValueError:
        return None


def flow_rows(block: bytes, first: int, now: datetime, limits: Limits) -> list[FlowRow] | None:
    """The flows of ``block`` as audit_rows takes audit records: None when the per-line path
    (records.flow_row) must take the block."""
    if shardlog_native is not None:
        rows = _natively(shardlog_native.flow_rows, FlowRow, block, first, now, limits)
        if rows is not None:
            return rows
    return msgspec_flow_rows(block, first, now, limits)


def msgspec_flow_rows(
    block: bytes, first: int, now: datetime, limits: Limits
) -> list[FlowRow] | None:
    """flow_rows without the native decoder: the reference it is held to."""
    lines = _lines(_DECODE_FLOWS, block)
    if lines is None:
        return None
    default_ts = limits.default_ts or now
    latest = now + limits.future_skew
    rows: list[FlowRow] = []
    append = rows.append
    for number, line in enumerate(lines, first):
        switch = line.switch
        if switch not in limits.valid_keys and not _valid_key(switch, limits):
            return None
        ts = _ts(line.ts, default_ts, latest)
        src, dst = _address(line.src_ip), _address(line.dst_ip)
        if ts is None or src is None or dst is None:
            return None
        version = version_of(src)
        declared = line.ip_version
        if version_of(dst) != version or (declared is not None and declared != version):
            return None
        append(
            FlowRow(
                number,
                switch,
                ts,
                src,
                dst,
                line.src_port,
                line.dst_port,
                version,
                line.proto,
                line.octets,
                line.packets,
                None,
                line.tcp_flags,
                line.sampling_rate,
            )
        )
    return rows
