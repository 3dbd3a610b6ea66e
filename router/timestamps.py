"""RFC 3339 timestamps as clients send them (ingest ``ts``, search ``from``/``to``).

Python's ``datetime.fromisoformat`` takes all of ISO 8601 (week dates, ordinal dates, basic
format, any Unicode digit); RFC 3339 is one narrow profile of it, checked here first.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

# A day's margin at both ends, so that day arithmetic on any accepted instant stays in range.
EARLIEST = datetime(1, 1, 2, tzinfo=UTC)
LATEST = datetime(9999, 12, 30, tzinfo=UTC)

# The profile, as a regular expression: what SHAPES below spell out one by one.
RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?"
    r"(?:[Zz]|[+-][0-9]{2}:[0-9]{2})"
)
# A value with its ASCII digits made 0 and t, z made upper case is one of these shapes exactly
# when RFC3339 matches it: one translate and one set look-up, half the regular expression's
# cost (ingest checks every record's ts).
_SHAPE = str.maketrans({**{str(digit): "0" for digit in range(10)}, "t": "T", "z": "Z"})
SHAPES = frozenset(
    f"0000-00-00T00:00:00{fraction}{zone}"
    for fraction in ("", *("." + "0" * digits for digits in range(1, 10)))
    for zone in ("Z", "+00:00", "-00:00")
)


class TimestampError(ValueError):
    """Why a value is not a usable RFC 3339 timestamp (no part of the value in the text)."""


def parse_rfc3339(value: str) -> datetime:
    """An aware datetime for ``2026-11-23T18:00:00.123Z`` and the like; the instant must exist
    in UTC (``0001-01-01T00:00:00+14:00`` does not)."""
    if len(value) > 40 or value.translate(_SHAPE) not in SHAPES:
        raise TimestampError(
            "is not an RFC 3339 timestamp (like 2026-11-23T18:00:00Z or "
            "2026-11-23T19:00:00.5+01:00)"
        )
    try:
        parsed = datetime.fromisoformat(value.upper())
        # Any instant of the years between is in range, whatever its offset.
        in_range = 1 < parsed.year < 9999 or EARLIEST <= parsed.astimezone(UTC) < LATEST
    except (ValueError, OverflowError):
        in_range = False
    if not in_range:
        raise TimestampError(
            "is not a valid instant between 0001-01-02 and 9999-12-30 UTC"
        ) from None
    return parsed


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EARLIEST_NS = int((EARLIEST - _EPOCH).total_seconds()) * 10**9
_LATEST_NS = int((LATEST - _EPOCH).total_seconds()) * 10**9


def from_unix_nanos(nanos: int) -> datetime:
    """The instant ``nanos`` after the Unix epoch (log shippers' timestamps), cut to the
    microsecond: what PostgreSQL's timestamptz keeps."""
    if not _EARLIEST_NS <= nanos < _LATEST_NS:
        raise TimestampError("is not a valid instant between 0001-01-02 and 9999-12-30 UTC")
    return _EPOCH + timedelta(microseconds=nanos // 1000)
