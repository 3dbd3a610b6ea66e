"""The native audit decoder (native/, Rust) against the per-line path it must equal: it takes a
block only when orjson + records.audit_row take every line of it, makes the same rows (the
same instants and offsets, the same texts), and takes every block of the common shape."""

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import orjson
import pytest
import shardlog_native
from hypothesis import given, settings
from hypothesis import strategies as st

from router import native as native_extension
from router.ingest import typed
from router.ingest.records import AuditRow, audit_row
from tests.support import per_line_rows
from tests.unit.native_decoding import (
    DEFAULT_TS,
    EXAMPLES,
    NOW,
    hostile_blocks,
    limits,
    taken_as_per_line,
)


def native(block: bytes, first: int) -> list[AuditRow] | None:
    given_limits = limits()
    return shardlog_native.audit_rows(
        block,
        first,
        DEFAULT_TS,
        (NOW + given_limits.future_skew - datetime(1970, 1, 1, tzinfo=UTC))
        // timedelta(microseconds=1),
        given_limits.max_content_bytes,
        AuditRow,
        lambda key: typed._valid_key(key, given_limits),
    )


def both_ways(block_lines: list[bytes], first: int) -> tuple[Any, list[AuditRow] | None]:
    """The native rows of the lines as one block, and the per-line path's."""
    block = b"\n".join(block_lines)
    return native(block, first), per_line_rows(audit_row, block, first, NOW, limits())


def same_rows(got: list[AuditRow], expected: list[AuditRow]) -> None:
    assert got == expected
    for row, reference in zip(got, expected, strict=True):
        assert type(row) is AuditRow
        assert row.ts.utcoffset() == reference.ts.utcoffset()
        assert row.ts.isoformat() == reference.ts.isoformat()


def test_the_extension_is_built_and_used() -> None:
    """make install builds native/; without it every block would take the msgspec path."""
    assert native_extension.AVAILABLE


# --- record strategies ------------------------------------------------------------------

OFFSETS = st.integers(-23 * 60 - 59, 23 * 60 + 59)
INSTANTS = st.datetimes(datetime(1, 1, 1), datetime(9999, 12, 31, 23, 59, 59))
LAST_VALID = datetime(2026, 11, 24)


@st.composite
def timestamps(draw: st.DrawFn, valid_only: bool = False) -> str:
    """RFC 3339 texts of every shape the profile allows, and (unless valid_only) near misses."""
    local = draw(INSTANTS if not valid_only else st.datetimes(datetime(2, 1, 1), LAST_VALID))
    minutes = draw(OFFSETS)
    sign = "-" if minutes < 0 else "+"
    zone = draw(
        st.sampled_from(["Z", "z", f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"])
    )
    digits = draw(st.integers(0, 9))
    fraction = f"{local.microsecond:06d}{draw(st.integers(0, 999)):03d}"[:digits]
    separator = draw(st.sampled_from(["T", "t"]))
    text = (
        f"{local.year:04d}-{local.month:02d}-{local.day:02d}{separator}{local:%H:%M:%S}"
        + (f".{fraction}" if digits else "")
        + zone
    )
    if valid_only:
        return text
    broken = draw(st.integers(0, 8))
    if broken == 1:
        at = draw(st.integers(0, len(text) - 1))
        text = text[:at] + draw(st.sampled_from("0123456789:-+.TZ x٣")) + text[at + 1 :]
    elif broken == 2:
        text = draw(st.sampled_from(["2026-02-29", "2024-02-30", "2026-13-01", "2026-00-10"]))
        text += draw(st.sampled_from(["T00:00:00Z", "T24:00:00Z", "T23:60:00Z", "T23:59:60Z"]))
    elif broken == 3:
        text = draw(st.sampled_from(["0001", "9999", "0000"])) + text[4:]
    return text


KEYS = st.one_of(
    st.sampled_from(["alice", "bob", "o-1", "émile", "x y"]),
    st.text(min_size=0, max_size=14),
)
CONTENTS = st.one_of(
    st.sampled_from(["logged in", "a" * 64, "é" * 32, "é" * 33, "a" * 65, "tab\there"]),
    st.text(max_size=70),
)


@st.composite
def records(draw: st.DrawFn) -> dict[str, object]:
    record: dict[str, object] = {"owner": draw(KEYS), "content": draw(CONTENTS)}
    if draw(st.booleans()):
        record["ts"] = draw(st.one_of(timestamps(), st.none(), st.just(12)))
    if draw(st.integers(0, 5)) == 0:
        record["attrs"] = draw(st.sampled_from([None, {"k": 1}, [1], "x"]))
    if draw(st.integers(0, 9)) == 0:
        record["extra"] = 1
    if draw(st.integers(0, 9)) == 0:
        del record[draw(st.sampled_from(["owner", "content"]))]
    return dict(draw(st.permutations(list(record.items()))))


@st.composite
def lines(draw: st.DrawFn, record: st.SearchStrategy[dict[str, object]]) -> bytes:
    value = draw(record)
    style = draw(st.integers(0, 3))
    if style == 0:
        return orjson.dumps(value)
    if style == 1:
        return json.dumps(value, ensure_ascii=True).encode()
    if style == 2:
        return json.dumps(
            value, ensure_ascii=False, indent=None, separators=(" , ", " : ")
        ).encode()
    return b" \t" + orjson.dumps(value) + b"\r"


ODD_LINES = st.sampled_from(
    [
        b"",
        b"{}",
        b'{"owner":"alice","content":"x","owner":"bob"}',
        b'{"owner":"alice","content":"\\ud800"}',
        b'{"owner":"alice","content":"\\ud83d\\ude00 \\u00e9 \\/ \\b \\f"}',
        b'{"owner":"alice","content":"\xff"}',
        b'{"owner":"alice","content":"x"} {"owner":"bob","content":"y"}',
        b'{"owner":"alice","content":"x",}',
        b'{"owner":"alice","content":"x"',
        b'{"owner":"alice","content":"x","ts":nul}',
        b'{"owner":"alice","content":"x","ts":"2030-01-01T00:00:00Z"}',
        b'{"owner":"alice","content":"x","ts":"2026-11-25T12:05:00Z"}',
        b'{"owner":"alice","content":"x","ts":"2026-11-25T12:05:00.000001Z"}',
        b'{"owner":"alice","content":"nul \\u0000"}',
    ]
)


@pytest.mark.slow
@settings(max_examples=EXAMPLES)
@given(
    st.lists(st.one_of(lines(records()), ODD_LINES), min_size=1, max_size=5),
    st.integers(0, 10),
)
def test_the_native_decoder_makes_the_per_line_rows_or_hands_back(
    block_lines: list[bytes], first: int
) -> None:
    fast, expected = both_ways(block_lines, first)
    taken_as_per_line(fast, expected, block_lines, same_rows)


@st.composite
def ordinary(draw: st.DrawFn) -> dict[str, object]:
    """The common shape: a printable owner, a valid ts or none, short content without NUL."""
    record: dict[str, object] = {
        "owner": draw(st.text(st.characters(codec="utf-8", categories=["L", "N"]), min_size=1)),
        "content": draw(st.text(st.characters(codec="utf-8", exclude_characters="\x00"))),
    }
    record["owner"] = str(record["owner"])[:12]
    record["content"] = str(record["content"])[:16]
    if draw(st.booleans()):
        record["ts"] = draw(timestamps(valid_only=True))
    if draw(st.booleans()):
        record["ts" if draw(st.booleans()) else "attrs"] = None
    return dict(draw(st.permutations(list(record.items()))))


@pytest.mark.slow
@settings(max_examples=1000)
@given(st.lists(lines(ordinary()), min_size=1, max_size=5), st.integers(0, 10))
def test_the_native_decoder_takes_every_ordinary_block(
    block_lines: list[bytes], first: int
) -> None:
    fast, expected = both_ways(block_lines, first)
    assert expected is not None
    assert fast is not None, block_lines
    same_rows(fast, expected)


def test_offsets_become_the_same_time_zones() -> None:
    block = b"\n".join(
        [
            b'{"owner":"a","content":"x","ts":"2026-11-25T10:00:00-00:00"}',
            b'{"owner":"a","content":"x","ts":"2026-11-25T10:00:00.5+05:30"}',
            b'{"owner":"a","content":"x","ts":"2026-11-25T10:00:00.123456789-01:15"}',
            b'{"owner":"a","content":"x"}',
        ]
    )
    rows = native(block, 0)
    assert rows is not None
    assert [row.ts.tzinfo for row in rows[:3]] == [
        UTC,
        timezone(timedelta(hours=5, minutes=30)),
        timezone(-timedelta(hours=1, minutes=15)),
    ]
    assert rows[2].ts.microsecond == 123456
    assert rows[3].ts is DEFAULT_TS


def test_rows_of_one_owner_share_its_key_and_valid_keys_are_remembered() -> None:
    given_limits = limits()
    block = b'{"owner":"alice","content":"a"}\n{"owner":"alice","content":"b"}'
    rows = typed.audit_rows(block, 0, NOW, given_limits)
    assert rows is not None
    assert rows[0].owner is rows[1].owner
    assert given_limits.valid_keys == {"alice"}


def test_a_row_type_of_another_layout_is_refused() -> None:
    class NotATuple:
        pass

    try:
        shardlog_native.audit_rows(
            b'{"owner":"a","content":"x"}', 0, NOW, 0, 64, NotATuple, lambda key: True
        )
    except TypeError as exc:
        assert "NamedTuple" in str(exc)
    else:
        raise AssertionError("a type of another layout was allocated as a tuple")


@pytest.mark.slow
@settings(max_examples=EXAMPLES)
@given(hostile_blocks(lines(ordinary())))
def test_hostile_bytes_are_rows_or_handed_back(block_lines: list[bytes]) -> None:
    """Any bytes at all (lines of valid records with a byte or three changed, or noise): rows
    equal to the per-line path's, or None; never an exception (a Rust panic would be one)."""
    fast, expected = both_ways(block_lines, 0)
    taken_as_per_line(fast, expected, block_lines, same_rows)
