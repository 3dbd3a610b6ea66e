from datetime import UTC, datetime, timedelta

import pytest

from router.errors import Invalid
from router.ingest.records import Limits, Location, audit_row, flow_row

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
LIMITS = Limits(
    max_content_bytes=100,
    max_attrs_bytes=50,
    max_owner_chars=256,
    future_skew=timedelta(minutes=5),
    max_attrs_depth=3,
)
AT = Location("records", 3)


def audit(**fields):
    return audit_row({"owner": "o", "content": "c", **fields}, AT, NOW, LIMITS)


def flow(**fields):
    base = {
        "switch": "s",
        "src_ip": "10.0.0.1",
        "dst_ip": "10.0.0.2",
        "src_port": 1,
        "dst_port": 2,
        "bytes": 10,
    }
    return flow_row({**base, **fields}, AT, NOW, LIMITS)


def test_audit_defaults_ts_to_now_and_keeps_attrs_as_json() -> None:
    row = audit(attrs={"b": [1, 2]})
    assert row.ts == NOW
    assert row.attrs == '{"b":[1,2]}'
    assert audit(ts="2026-11-23T13:00:00+01:00").ts == NOW
    assert audit(ts="2026-11-23T12:00:00Z").ts == NOW


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"owner": ""}, "owner", "non-empty"),
        ({"owner": 5}, "owner", "non-empty"),
        ({"owner": "x" * 257}, "owner", "limit"),
        ({"owner": "a\nb"}, "owner", "control"),
        ({"content": None}, "content", "string"),
        ({"content": "x" * 101}, "content", "longer"),
        ({"content": "ü" * 51}, "content", "longer"),
        ({"content": "a\x00b"}, "content", "NUL"),
        ({"ts": "2026-11-23T12:00:00"}, "ts", "RFC 3339"),
        ({"ts": "2026-11-23"}, "ts", "RFC 3339"),
        ({"ts": "2026-W47-1T00:00:00Z"}, "ts", "RFC 3339"),
        ({"ts": "20261123T120000Z"}, "ts", "RFC 3339"),
        ({"ts": "\u0662\u0660\u0662\u0666-11-23T12:00:00Z"}, "ts", "RFC 3339"),
        ({"ts": "0001-01-01T00:00:00+14:00"}, "ts", "valid instant"),
        ({"ts": "2026-02-30T00:00:00Z"}, "ts", "valid instant"),
        ({"owner": "a\u0085b"}, "owner", "control"),
        ({"owner": "a\u2028b"}, "owner", "control"),
        ({"attrs": {"k": {"k": {"k": {"k": {}}}}}}, "attrs", "deeper than 3"),
        ({"ts": "yesterday"}, "ts", "RFC 3339"),
        ({"ts": 1700000000}, "ts", "RFC 3339"),
        ({"ts": "2026-11-23T12:06:00Z"}, "ts", "future"),
        ({"attrs": [1]}, "attrs", "object"),
        ({"attrs": {"k": "x" * 60}}, "attrs", "longer"),
        ({"attrs": {"k": "\x00"}}, "attrs", "NUL"),
        ({"extra": 1}, "extra", "not a known field"),
    ],
)
def test_audit_errors_name_record_and_field(fields, field, words) -> None:
    with pytest.raises(Invalid) as caught:
        audit(**fields)
    assert caught.value.field == f"records[3].{field}"
    assert words in caught.value.message


def test_non_object_record() -> None:
    with pytest.raises(Invalid) as caught:
        audit_row([1, 2], AT, NOW, LIMITS)
    assert caught.value.field == "records[3]"


def test_flow_version_is_derived_and_checked() -> None:
    assert flow().ip_version == 4
    assert flow(src_ip="2001:db8::1", dst_ip="2001:DB8::2").ip_version == 6
    assert flow(ip_version=4).packets == 0
    assert flow(proto=6).proto == 6
    assert flow().proto is None


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"src_ip": "10.0.0.300"}, "src_ip"),
        ({"dst_ip": "2001:db8::1"}, "dst_ip"),
        ({"ip_version": 6}, "ip_version"),
        ({"ip_version": 5}, "ip_version"),
        ({"src_port": 70000}, "src_port"),
        ({"dst_port": -1}, "dst_port"),
        ({"dst_port": True}, "dst_port"),
        ({"proto": 256}, "proto"),
        ({"bytes": None}, "bytes"),
        ({"bytes": -5}, "bytes"),
        ({"packets": "many"}, "packets"),
        ({"bytes": " 12 "}, "bytes"),
        ({"src_port": "\u0661\u0662"}, "src_port"),
        ({"ip_version": "4"}, "ip_version"),
        ({"ip_version": 4.0}, "ip_version"),
        ({"switch": ""}, "switch"),
    ],
)
def test_flow_errors_name_record_and_field(fields, field) -> None:
    with pytest.raises(Invalid) as caught:
        flow(**fields)
    assert caught.value.field == f"records[3].{field}"


def test_attrs_nested_past_what_orjson_writes_is_refused_not_a_crash() -> None:
    deep: dict = {}
    for _ in range(600):
        deep = {"k": deep}
    with pytest.raises(Invalid) as caught:
        audit(attrs=deep)
    assert caught.value.field == "records[3].attrs"


def test_negative_port_says_out_of_range() -> None:
    with pytest.raises(Invalid) as caught:
        flow(src_port=-1)
    assert "between 0 and 65535" in caught.value.message


def test_errors_quote_at_most_a_little_of_a_value() -> None:
    with pytest.raises(Invalid) as caught:
        flow(src_ip="9" * 10_000_000)
    assert len(caught.value.message) < 300
    assert "10000000 characters" in caught.value.message


def test_nesting_depth() -> None:
    from router.ingest.records import nesting_depth

    assert nesting_depth(1) == 0
    assert nesting_depth({}) == 1
    assert nesting_depth({"a": [1, {"b": []}]}) == 4
