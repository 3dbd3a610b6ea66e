"""NDJSON audit records decoded by msgspec, a block of lines in one C-level pass, straight into
the rows the writer takes: the hot path of REST ingest.

Only a block every line of which the per-line path (orjson, then ``records.audit_row``) would
accept is taken here, row for row what that path makes of it; a block with anything else in
it (a blank line, an unknown field, a bad value, attrs) is handed back, and the per-line path
takes it and names the record and field at fault. So this module never decides what is
invalid and never words an error: it only makes valid blocks cheaper.

Lines become the elements of one JSON array (``[`` + the lines joined by commas + ``]``), so
that a block is one call: a newline inside a value or a blank line then leaves two commas in a
row or a comma beside a bracket, which no JSON takes, and a line holding two values shows as
more elements than lines.
"""

from __future__ import annotations

from datetime import datetime

import msgspec
import orjson

from router.catalog.rules import owner_key_problem
from router.errors import Invalid
from router.ingest.records import AuditRow, Limits, Location, attrs_text
from router.timestamps import TimestampError, parse_rfc3339

_NULL = msgspec.Raw(b"null")


class _AuditLine(msgspec.Struct, forbid_unknown_fields=True):
    owner: str
    content: str
    ts: str | None = None
    # Kept as JSON text here, then held to records.attrs_text's rules like any other attrs.
    attrs: msgspec.Raw = _NULL


_DECODE = msgspec.json.Decoder(list[_AuditLine]).decode


def audit_rows(block: bytes, first: int, now: datetime, limits: Limits) -> list[AuditRow] | None:
    """The rows of ``block`` (complete NDJSON lines joined by LF, the first numbered
    ``first``), or None when the per-line path must take the block."""
    try:
        lines = _DECODE(b"[" + block.replace(b"\n", b",") + b"]")
    # msgspec refuses to nest past its limit with RecursionError.
    except (msgspec.MsgspecError, UnicodeDecodeError, RecursionError):
        return None
    if len(lines) != block.count(b"\n") + 1:
        return None
    valid, most_bytes = limits.valid_keys, limits.max_content_bytes
    default_ts = limits.default_ts or now
    latest = now + limits.future_skew
    rows: list[AuditRow] = []
    append = rows.append
    for number, line in enumerate(lines, first):
        owner = line.owner
        if owner not in valid:
            if owner_key_problem(owner, limits.max_owner_chars) is not None:
                return None
            if len(valid) < 10_000:
                valid.add(owner)
        if line.ts is None:
            ts = default_ts
        else:
            try:
                ts = parse_rfc3339(line.ts)
            except TimestampError:
                return None
            if ts > latest:
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
