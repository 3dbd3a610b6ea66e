"""The native COPY stream of audit rows (native/src/audit_copy.rs) byte for byte against
PostgreSQL's binary COPY format written out here in Python: header, per row the field count,
timestamptz as int8 microseconds from 2000-01-01 UTC, text as UTF-8, jsonb as version 1 + text,
NULL as length -1, trailer."""

import struct
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import shardlog_native
from hypothesis import given, settings
from hypothesis import strategies as st

POSTGRES_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)


def reference(rows: list[tuple[datetime, str, str | None]]) -> bytes:
    out = [HEADER]
    for ts, content, attrs in rows:
        micros = (ts - POSTGRES_EPOCH) // timedelta(microseconds=1)
        text = content.encode()
        out.append(struct.pack("!hiqi", 3, 8, micros, len(text)) + text)
        if attrs is None:
            out.append(struct.pack("!i", -1))
        else:
            json = attrs.encode()
            out.append(struct.pack("!ib", len(json) + 1, 1) + json)
    out.append(struct.pack("!h", -1))
    return b"".join(out)


ZONES = st.one_of(
    st.just(UTC),
    st.timedeltas(timedelta(hours=-23, minutes=-59), timedelta(hours=23, minutes=59)).map(timezone),
)
TIMES = st.datetimes(datetime(1, 1, 2), datetime(9999, 12, 30), timezones=ZONES)
TEXTS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)
ROWS = st.lists(st.tuples(TIMES, TEXTS, st.one_of(st.none(), TEXTS)), max_size=20)


@settings(max_examples=2000)
@given(ROWS)
def test_the_stream_is_postgresql_binary_copy(rows: list[tuple[datetime, str, str | None]]) -> None:
    assert shardlog_native.audit_copy(rows) == reference(rows)


@pytest.mark.parametrize(
    ("row", "error", "message"),
    [
        ((datetime(2026, 1, 1), "x", None), ValueError, "timezone-aware"),
        (("2026-01-01", "x", None), TypeError, "datetime"),
        ((datetime(2026, 1, 1, tzinfo=UTC), b"x", None), TypeError, "content must be a str"),
        ((datetime(2026, 1, 1, tzinfo=UTC), "x", {"k": 1}), TypeError, "attrs must be a str"),
        ((datetime(2026, 1, 1, tzinfo=UTC), "x"), ValueError, "(ts, content, attrs)"),
        ([datetime(2026, 1, 1, tzinfo=UTC), "x", None], TypeError, "tuple"),
        ((datetime(2026, 1, 1, tzinfo=UTC), "\ud800", None), UnicodeEncodeError, "surrogate"),
    ],
)
def test_rows_of_another_shape_are_refused(row: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)")):
        shardlog_native.audit_copy([row])
