"""Every row of one owner between two times, in time order, as NDJSON or CSV: the export half
of the per-owner lifecycle. Runs through the search service's export (a cursor per shard), so
memory stays at about one batch per shard whatever the range. Cells are exact (no formula
quoting as in the API's CSV): this export is for restores and data portability."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Literal

import orjson

from router.auth.scopes import SYSTEM
from router.db.ddl import FLOW_EXPORT_READ_COLUMNS
from router.errors import BadRequest, excerpt
from router.search.query import AuditQuery, FlowQuery, Keys, Window
from router.search.service import SearchService
from router.timestamps import TimestampError, parse_rfc3339

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
        *FLOW_EXPORT_READ_COLUMNS,
    ),
}


_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def parse_bound(value: str, field: str, end: bool) -> datetime:
    """A day (YYYY-MM-DD: its start, or for an end its whole day) or an RFC 3339 time."""
    if _DAY.fullmatch(value):
        try:
            start = datetime.combine(date.fromisoformat(value), time(), UTC)
            return start + timedelta(days=1) if end else start
        except (ValueError, OverflowError):
            raise BadRequest(f"{excerpt(value)} is not a valid day", field) from None
    try:
        return parse_rfc3339(value)
    except TimestampError as exc:
        raise BadRequest(
            f"{excerpt(value)} is neither a day (YYYY-MM-DD) nor {exc}", field
        ) from None


def query_for(kind: str, key: str, window: Window) -> AuditQuery | FlowQuery:
    if kind == "audit":
        return AuditQuery(Keys.of([key]), window, (), "substring", "asc")
    return FlowQuery(Keys.of([key]), window, None, None, None, None, None, None, False, "asc")


def _csv_line(values: list[Any]) -> bytes:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(values)
    return out.getvalue().encode()


def _cell(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"  # as in the API's CSV (router/search/lines.py)
    if isinstance(value, dict | list):
        return orjson.dumps(value).decode()
    return "" if value is None else value


async def export_owner(
    search: SearchService, kind: str, key: str, window: Window, fmt: Format
) -> AsyncIterator[bytes]:
    columns = COLUMNS[kind]
    if fmt == "csv":
        yield _csv_line(list(columns))
    chunks = await search.export(query_for(kind, key, window), "ndjson", SYSTEM)
    async for chunk in chunks:
        if fmt == "ndjson":
            yield chunk
            continue
        for line in chunk.splitlines():
            item = orjson.loads(line)
            yield _csv_line([_cell(item.get(name)) for name in columns])
