"""Request bodies as streams of records: JSON arrays, NDJSON (parsed line by line as it
arrives) and flow CSV. Bytes are counted against the body limit and the router-wide in-flight
budget as they arrive, and hashed for Idempotency-Key checks."""

from __future__ import annotations

import codecs
import csv
import hashlib
from collections.abc import AsyncIterator
from typing import Any

import orjson

from router.db.inet import encode_address
from router.errors import BadRequest, Invalid, Overloaded, TooLarge


class ByteBudget:
    """Bytes of request bodies the router holds at once, across all requests."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self, amount: int) -> bool:
        if self.used + amount > self.limit:
            return False
        self.used += amount
        return True

    def give_back(self, amount: int) -> None:
        self.used -= amount


class Body:
    """One request's byte stream with its size limit, budget charge and hash."""

    def __init__(
        self,
        chunks: AsyncIterator[bytes],
        max_bytes: int,
        budget: ByteBudget,
        retry_after_s: int,
    ) -> None:
        self._chunks = chunks
        self._max_bytes = max_bytes
        self._budget = budget
        self._retry_after_s = retry_after_s
        self.size = 0
        self.charged = 0
        self._hash = hashlib.sha256()

    @property
    def digest(self) -> str:
        return self._hash.hexdigest()

    def charge(self, amount: int) -> None:
        if not self._budget.take(amount):
            raise Overloaded(
                "the router holds as many request bytes as it may; retry shortly",
                retry_after_s=self._retry_after_s,
            )
        self.charged += amount

    def release(self) -> None:
        self._budget.give_back(self.charged)
        self.charged = 0

    async def chunks(self) -> AsyncIterator[bytes]:
        async for chunk in self._chunks:
            if not chunk:
                continue
            self.size += len(chunk)
            if self.size > self._max_bytes:
                raise TooLarge(f"request body is larger than {self._max_bytes} bytes", "body")
            self.charge(len(chunk))
            self._hash.update(chunk)
            yield chunk


# Parsers yield records in lists (one per arriving chunk): an async generator step per record
# costs more than parsing it.
Batch = list[tuple[int, Any]]


async def json_array(body: Body) -> AsyncIterator[Batch]:
    data = b"".join([chunk async for chunk in body.chunks()])
    try:
        records = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"body is not valid JSON: {exc}", "body") from None
    if not isinstance(records, list):
        raise Invalid("body must be a JSON array of records", "body")
    yield list(enumerate(records))


async def _lines(body: Body) -> AsyncIterator[list[bytes]]:
    pending = b""
    async for chunk in body.chunks():
        pending += chunk
        *complete, pending = pending.split(b"\n")
        if complete:
            yield complete
    if pending:
        yield [pending]


async def ndjson(body: Body) -> AsyncIterator[Batch]:
    index = 0
    loads, decode_error = orjson.loads, orjson.JSONDecodeError
    async for lines in _lines(body):
        batch: Batch = []
        for line in lines:
            if not line.strip():
                continue
            try:
                batch.append((index, loads(line)))
            except decode_error as exc:
                raise BadRequest(
                    f"records[{index}] is not valid JSON: {exc}", f"records[{index}]"
                ) from None
            index += 1
        yield batch


_CSV_COLUMNS = {
    "src_ip": "src_ip",
    "dest_ip": "dst_ip",
    "dst_ip": "dst_ip",
    "src_port": "src_port",
    "dest_port": "dst_port",
    "dst_port": "dst_port",
    "ip_type": "ip_type",
    "ip_version": "ip_type",
    "ts": "ts",
    "bytes": "bytes",
    "packets": "packets",
    "proto": "proto",
}
_DEFAULT_LAYOUT = ("src_ip", "dst_ip", "src_port", "dst_port", "ip_type")
_IP_TYPES = {"ipv4": 4, "ipv6": 6, "4": 4, "6": 6}


def _is_header(fields: list[str]) -> bool:
    try:
        encode_address(fields[0].strip())
    except ValueError:
        return True
    return False


def _layout(fields: list[str], line: int) -> tuple[str, ...]:
    names = [field.strip().lower() for field in fields]
    unknown = [name for name in names if name not in _CSV_COLUMNS]
    if unknown:
        raise Invalid(
            f"lines[{line}]: unknown CSV column {unknown[0]!r}; known: "
            + ", ".join(sorted(_CSV_COLUMNS)),
            f"lines[{line}]",
        )
    layout = tuple(_CSV_COLUMNS[name] for name in names)
    missing = [c for c in _DEFAULT_LAYOUT if c not in layout]
    if missing:
        raise Invalid(f"lines[{line}]: CSV header lacks {', '.join(missing)}", f"lines[{line}]")
    return layout


def _csv_record(
    fields: list[str], layout: tuple[str, ...], line: int, switch: str
) -> dict[str, Any]:
    if len(fields) != len(layout):
        raise Invalid(
            f"lines[{line}] has {len(fields)} columns, expected {len(layout)}", f"lines[{line}]"
        )
    record: dict[str, Any] = {"switch": switch, "bytes": 0}
    for name, value in zip(layout, fields, strict=True):
        value = value.strip()
        if name == "ip_type":
            version = _IP_TYPES.get(value.lower())
            if version is None:
                raise Invalid(
                    f"lines[{line}]: ip_type {value!r} is not IPv4 or IPv6",
                    f"lines[{line}].ip_type",
                )
            record["ip_version"] = version
        elif value or name not in ("ts", "proto"):
            record[name] = value
    return record


async def csv_flows(body: Body, switch: str) -> AsyncIterator[Batch]:
    """Flow CSV: src_ip,dest_ip,src_port,dest_port,ip_type, optionally with a header row that
    may add ts, bytes, packets and proto. LF or CRLF, final newline optional. Records are
    numbered by physical line (from 1) and errors name ``lines[N]``."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    layout: tuple[str, ...] | None = None
    line_number = 0
    async for lines in _lines(body):
        batch: Batch = []
        for raw in lines:
            line_number += 1
            try:
                text = decoder.decode(raw + b"\n").rstrip("\r\n")
            except UnicodeDecodeError:
                raise Invalid(
                    f"lines[{line_number}] is not UTF-8", f"lines[{line_number}]"
                ) from None
            if not text.strip():
                continue
            fields = next(csv.reader([text]))
            if layout is None:
                if _is_header(fields):
                    layout = _layout(fields, line_number)
                    continue
                layout = _DEFAULT_LAYOUT
            batch.append((line_number, _csv_record(fields, layout, line_number, switch)))
        yield batch
