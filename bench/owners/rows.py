"""The rows bench/owners writes: N owners, each 3 rows on each of 3 past days, in NDJSON
requests of many owners (as a fleet of small writers would send them), and the 1-hour window
that holds one owner's rows of a day."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

import orjson

ROWS_PER_OWNER_DAY = 3
DAYS = 3
# An owner's rows of a day sit at its own offset into the day (under 23 h, so a 1-hour
# window around them stays inside the day), a minute apart.
_SPACING_S = 60
_DAY_SPAN_S = 23 * 3600


def days(today: date) -> list[date]:
    """The 3 past days written, newest first: well inside the accepted window (30 days by
    default) and never today, so a run across midnight writes the same days."""
    return [today - timedelta(days=n) for n in range(1, DAYS + 1)]


def owner_key(label: str, index: int) -> str:
    return f"{label}-{index:07d}"


def first_ts(index: int, day: date) -> datetime:
    offset = (index * 7919) % _DAY_SPAN_S
    return datetime.combine(day, time(), UTC) + timedelta(seconds=offset)


def window(index: int, day: date) -> tuple[datetime, datetime]:
    """One hour holding the owner's rows of ``day``."""
    start = first_ts(index, day) - timedelta(minutes=5)
    return start, start + timedelta(hours=1)


def content(index: int, day: date, row: int, tag: str) -> str:
    """About 100 characters, as an audit line of a small owner is."""
    return (
        f"{tag} user{index % 9973} session s{index:07d}{row} action=read "
        f"resource=/projects/{index % 97}/files/{row} day={day.isoformat()} result=ok"
    )


def owner_lines(label: str, index: int, on: list[date], tag: str) -> list[bytes]:
    key = owner_key(label, index)
    lines = []
    for day in on:
        start = first_ts(index, day)
        for row in range(ROWS_PER_OWNER_DAY):
            ts = (start + timedelta(seconds=row * _SPACING_S)).isoformat()
            lines.append(
                orjson.dumps({"owner": key, "ts": ts, "content": content(index, day, row, tag)})
            )
    return lines


def bodies(label: str, owners: range, on: list[date], per_request: int, tag: str) -> list[bytes]:
    """NDJSON bodies of ``per_request`` owners each, every owner's rows of every day."""
    found = []
    indexes = list(owners)
    for start in range(0, len(indexes), per_request):
        lines = [
            line
            for i in indexes[start : start + per_request]
            for line in owner_lines(label, i, on, tag)
        ]
        found.append(b"\n".join(lines) + b"\n")
    return found


def payload_bytes(owners: range, on: list[date], tag: str) -> int:
    """The rows' own payload: their content's UTF-8 bytes and 8 bytes of ts each (what any
    layout must store; everything beyond it is the layout's overhead)."""
    return sum(
        len(content(i, day, row, tag).encode()) + 8
        for i in owners
        for day in on
        for row in range(ROWS_PER_OWNER_DAY)
    )
