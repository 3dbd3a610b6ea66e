"""parse_rfc3339's shape check (digits made 0, one set look-up) accepts exactly what the
profile's regular expression accepts."""

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router.timestamps import RFC3339, TimestampError, parse_rfc3339

PIECES = st.sampled_from(
    [
        "2026",
        "-",
        "11",
        "23",
        "T",
        "t",
        " ",
        "18",
        ":",
        "00",
        ".",
        "5",
        "123456789",
        "Z",
        "z",
        "+",
        "01:00",
        "-00:00",
        "0",
        "٣",
        "\uff11",
        ",",
        "W",
        "1",
        "+0100",
        "24",
        "60",
        "9999",
        "0001",
    ]
)
NEAR_MISSES = st.lists(PIECES, max_size=14).map("".join)


def reference(value: str) -> bool:
    return len(value) <= 40 and RFC3339.fullmatch(value) is not None


def shape_accepts(value: str) -> bool:
    try:
        parse_rfc3339(value)
    except TimestampError as exc:
        # Refused for its instant (day 30 of February, 24:00...), not its shape.
        return "valid instant" in str(exc)
    return True


@settings(max_examples=1500)
@given(st.one_of(NEAR_MISSES, st.text(max_size=40)))
def test_shape_check_matches_the_regular_expression(value: str) -> None:
    assert shape_accepts(value) == reference(value)


@given(st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31)))
def test_every_rendering_of_an_instant_is_taken(moment: datetime) -> None:
    text = moment.replace(tzinfo=UTC).isoformat()
    assert parse_rfc3339(text) == moment.replace(tzinfo=UTC)
    assert parse_rfc3339(text.replace("+00:00", "z").replace("T", "t")) == moment.replace(
        tzinfo=UTC
    )


@pytest.mark.parametrize(
    "value",
    [
        "2026-11-23 18:00:00Z",
        "2026-11-23T18:00:00",
        "2026-11-23T18:00:00+0100",
        "2026-11-23T18:00:00.Z",
        "2026-11-23T18:00:00.1234567890Z",
        "2026-11-23T18:00Z",
        "\uff12026-11-23T18:00:00Z",
        "2026-11-23T18:00:00+01:00:00",
    ],
)
def test_other_iso_8601_forms_are_refused(value: str) -> None:
    with pytest.raises(TimestampError):
        parse_rfc3339(value)
