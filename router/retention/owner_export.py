"""Every row of one owner between two times, in time order, as NDJSON or CSV: the export half
of the per-owner lifecycle. Runs through the search service page by page, so memory stays at
one page whatever the range."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Literal

import orjson

from router.errors import BadRequest
from router.search.query import AuditQuery, FlowQuery, Window
from router.search.service import SearchService

Format = Literal["ndjson", "csv"]

COLUMNS = {
    "audit": ("ts", "owner", "shard", "id", "content", "attrs"),
    "flow": (
        "first_seen",
        "last_seen",
        "switch",
        "shard",
        "id",
        "src_ip",
        "dst_ip",
        "src_port",
        "dst_port",
        "ip_version",
        "proto",
        "bytes",
        "packets",
        "flow_count",
    ),
}


def parse_bound(value: str, field: str, end: bool) -> datetime:
    """A day (YYYY-MM-DD: its start, or for an end its whole day) or an RFC 3339 time."""
    try:
        day = date.fromisoformat(value)
    except ValueError:
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise BadRequest(f"{value!r} is neither a day nor an RFC 3339 time", field) from None
        if moment.tzinfo is None:
            raise BadRequest("needs a UTC offset (RFC 3339)", field) from None
        return moment
    start = datetime.combine(day, time(), UTC)
    return start + timedelta(days=1) if end else start


def query_for(kind: str, key: str, window: Window) -> AuditQuery | FlowQuery:
    if kind == "audit":
        return AuditQuery(key, window, (), "substring", "asc")
    return FlowQuery(key, window, None, None, None, None, None, None, False, "asc")


def _csv_line(values: list[Any]) -> bytes:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(values)
    return out.getvalue().encode()


def _cell(value: Any) -> Any:
    if isinstance(value, dict | list):
        return orjson.dumps(value).decode()
    return "" if value is None else value


async def export_owner(
    search: SearchService, kind: str, key: str, window: Window, fmt: Format
) -> AsyncIterator[bytes]:
    columns = COLUMNS[kind]
    if fmt == "csv":
        yield _csv_line(list(columns))
    async for line in search.export(query_for(kind, key, window)):
        if fmt == "ndjson":
            yield line
        else:
            item = orjson.loads(line)
            yield _csv_line([_cell(item.get(name)) for name in columns])
