from datetime import UTC, datetime

import pytest

from router.errors import MAX_MESSAGE_CHARS, error_body, excerpt
from router.timestamps import TimestampError, parse_rfc3339


def test_excerpt_cuts_long_values_and_says_how_long() -> None:
    assert excerpt("abc") == "'abc'"
    quoted = excerpt("x" * 5000)
    assert len(quoted) < 140
    assert "5000 characters" in quoted


def test_error_body_never_grows_with_the_input() -> None:
    body = error_body("invalid", "m" * 10_000_000, "f" * 10_000)
    assert len(body["error"]["message"]) == MAX_MESSAGE_CHARS
    assert len(body["error"]["field"]) <= 100


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-23T18:00:00Z", datetime(2026, 11, 23, 18, tzinfo=UTC)),
        ("2026-11-23t18:00:00z", datetime(2026, 11, 23, 18, tzinfo=UTC)),
        ("2026-11-23T19:00:00.123456789+01:00", datetime(2026, 11, 23, 18, 0, 0, 123456, UTC)),
    ],
)
def test_rfc3339_accepted(text, expected) -> None:
    assert parse_rfc3339(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "2026-W47-1T00:00:00Z",
        "2026-327T00:00:00Z",
        "20261123T180000Z",
        "2026-11-23 18:00:00Z",
        "2026-11-23T18:00:00",
        "2026-11-23T18:00Z",
        "\u0662\u0660\u0662\u0666-11-23T18:00:00Z",
        "0001-01-01T00:00:00+14:00",
        "9999-12-31T23:00:00-02:00",
        "2026-13-01T00:00:00Z",
        "x" * 10_000,
    ],
)
def test_rfc3339_refused(text) -> None:
    with pytest.raises(TimestampError):
        parse_rfc3339(text)
