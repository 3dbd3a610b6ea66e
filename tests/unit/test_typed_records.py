"""The block decoder (router/ingest/typed.py) takes a block only when the per-line path
(orjson, then records.audit_row) takes every line of it, and makes the same rows of it."""

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from router.ingest.records import AuditRow, FlowRow, Limits, audit_row, flow_row
from router.ingest.typed import audit_rows, flow_rows
from tests.support import per_line_rows

NOW = datetime(2026, 11, 25, 12, tzinfo=UTC)

LINES = st.sampled_from(
    [
        b'{"owner":"alice","ts":"2026-11-25T10:00:00Z","content":"logged in"}',
        b'{"owner":"bob","content":"no ts"}',
        b'{"content":"key order","owner":"bob","ts":"2026-11-25t10:00:00.123456789z"}',
        b'{"owner":"alice","ts":"2026-11-25T11:00:00+02:00","content":"x","attrs":{"k":[1,2]}}',
        b'{"owner":"alice","content":"null attrs","attrs":null}',
        b'{"owner":"alice","content":"dup","owner":"carol"}',
        b'  {"owner":"alice","content":"spaces around"}  \r',
        b'{"owner":"alice","content":"esc \\u00e9 \\n \\" \\\\"}',
        b'{"owner":"alice","content":"nul \\u0000"}',
        b'{"owner":"alice","content":"lone \\ud800"}',
        b'{"owner":"","content":"empty owner"}',
        b'{"owner":"a\\tb","content":"control in owner"}',
        b'{"owner":1,"content":"number owner"}',
        b'{"owner":"alice","content":2}',
        b'{"owner":"alice","content":"x","extra":1}',
        b'{"owner":"alice","content":"x","attrs":[1]}',
        b'{"owner":"alice","content":"x","attrs":"text"}',
        b'{"owner":"alice","content":"x","attrs":{"big":123456789012345678901234567890}}',
        b'{"owner":"alice","content":"x","attrs":{"nul":"\\u0000"}}',
        b'{"owner":"alice","content":"x","ts":"2026-11-25 10:00:00Z"}',
        b'{"owner":"alice","content":"x","ts":"2030-01-01T00:00:00Z"}',
        b'{"owner":"alice","content":"x","ts":"0001-01-01T00:00:00Z"}',
        b'{"owner":"alice","content":"x","ts":12}',
        b'{"owner":"alice","content":"x"} {"owner":"bob","content":"y"}',
        b'{"owner":"alice","content":"x"},{"owner":"bob","content":"y"}',
        b'{"owner":"alice",',
        b'"content":"split over two lines"}',
        b"",
        b"   ",
        b"\x0c",
        b"[]",
        b"null",
        b"\xef\xbb\xbf{}",
        b'{"owner":"alice","content":"\xff"}',
        b'{"owner":"alice","content":"' + b"w" * 300 + b'"}',
    ]
)


def limits() -> Limits:
    return Limits(
        max_content_bytes=256,
        max_attrs_bytes=64,
        max_owner_chars=16,
        future_skew=timedelta(seconds=300),
        max_attrs_depth=4,
        default_ts=NOW - timedelta(hours=1),
    )


def per_line(block: bytes, first: int) -> list[AuditRow] | None:
    return per_line_rows(audit_row, block, first, NOW, limits())


@settings(max_examples=2000)
@given(st.lists(LINES, min_size=1, max_size=6), st.integers(0, 10))
def test_blocks_decode_as_the_per_line_path_does(lines: list[bytes], first: int) -> None:
    block = b"\n".join(lines)
    fast = audit_rows(block, first, NOW, limits())
    expected = per_line(block, first)
    if fast is not None:
        assert fast == expected
    # Blocks the per-line path takes but this one hands back are fine (blank lines, ...);
    # the reverse is not.
    if expected is None:
        assert fast is None


def test_an_ordinary_block_takes_the_fast_path() -> None:
    block = b"\n".join(
        [
            b'{"owner":"alice","ts":"2026-11-25T10:00:00Z","content":"a"}',
            b'{"owner":"bob","content":"b","attrs":{"k":"v"}}',
        ]
    )
    rows = audit_rows(block, 5, NOW, limits())
    assert rows == [
        AuditRow(5, "alice", datetime(2026, 11, 25, 10, tzinfo=UTC), "a", None),
        AuditRow(6, "bob", NOW - timedelta(hours=1), "b", '{"k":"v"}'),
    ]


FLOW_EXAMPLES = [
    b'{"switch":"sw1","ts":"2026-11-25T10:00:00Z","src_ip":"10.0.0.1","dst_ip":"10.0.0.2",'
    b'"src_port":1234,"dst_port":80,"proto":6,"bytes":100,"packets":2}',
    b'{"switch":"sw1","src_ip":"2001:db8::1","dst_ip":"2001:DB8::2","src_port":0,'
    b'"dst_port":65535,"bytes":0}',
    b'{"switch":"sw2","src_ip":" 10.0.0.1 ","dst_ip":"10.0.0.2","src_port":1,"dst_port":2,'
    b'"bytes":9223372036854775807,"ip_version":4,"tcp_flags":255,"sampling_rate":100}',
    b'{"switch":"sw2","src_ip":"::ffff:10.0.0.1","dst_ip":"::1","src_port":1,"dst_port":2,'
    b'"bytes":1,"proto":null,"ip_version":null,"tcp_flags":null,"sampling_rate":null}',
    b'{"switch":"sw1","src_ip":"10.0.0.1","dst_ip":"::1","src_port":1,"dst_port":2,"bytes":1}',
    b'{"switch":"sw1","src_ip":"10.0.0.1","dst_ip":"10.0.0.2","src_port":1,"dst_port":2,'
    b'"bytes":1,"ip_version":6}',
    b'{"switch":"sw1","src_ip":"10.0.0.1","dst_ip":"10.0.0.2","src_port":1,"dst_port":2,'
    b'"bytes":1,"ip_version":true}',
    b'{"switch":"sw1","src_ip":"10.0.0.1","dst_ip":"10.0.0.2","src_port":65536,"dst_port":2,'
    b'"bytes":1}',
    b'{"switch":"sw1","src_ip":"10.0.0.1","dst_ip":"10.0.0.2","src_port":1,"dst_port":2,'
    b'"bytes":-1}',
    b'{"switch":"sw1","src_ip":"10.0.0.1","dst_ip":"10.0.0.2","src_port":1,"dst_port":2,'
    b'"bytes":9223372036854775808}',
    b'{"switch":"sw1","src_ip":"10.0.0.1","dst_ip":"10.0.0.2","src_port":1.0,"dst_port":2,'
    b'"bytes":1}',
    b'{"switch":"sw1","src_ip":"10.0.0.1","dst_ip":"10.0.0.2","src_port":true,"dst_port":2,'
    b'"bytes":1}',
    b'{"switch":"sw1","src_ip":"10.0.0.1","dst_ip":"10.0.0.2","src_port":1,"dst_port":2,'
    b'"bytes":1,"packets":null}',
    b'{"switch":"sw1","src_ip":"10.0.0.1","dst_ip":"10.0.0.2","src_port":1,"dst_port":2,'
    b'"bytes":1,"proto":256}',
    b'{"switch":"sw1","src_ip":"10.0.0.1","dst_ip":"10.0.0.2","src_port":1,"dst_port":2,'
    b'"bytes":1,"sampling_rate":0}',
    b'{"switch":"sw1","src_ip":"10.0.0.1%eth0","dst_ip":"10.0.0.2","src_port":1,'
    b'"dst_port":2,"bytes":1}',
    b'{"switch":"sw1","src_ip":"fe80::1%eth0","dst_ip":"::2","src_port":1,"dst_port":2,"bytes":1}',
    b'{"switch":"sw1","src_ip":"10.0.0.256","dst_ip":"10.0.0.2","src_port":1,"dst_port":2,'
    b'"bytes":1}',
    b'{"switch":"sw1","src_ip":"10.0.0.1","dst_ip":"10.0.0.2","src_port":1,"dst_port":2}',
    b'{"switch":"sw1","src_ip":"10.0.0.1","dst_ip":"10.0.0.2","src_port":1,"dst_port":2,'
    b'"bytes":1,"ts":"2030-01-01T00:00:00Z"}',
    b'{"switch":"","src_ip":"10.0.0.1","dst_ip":"10.0.0.2","src_port":1,"dst_port":2,"bytes":1}',
    b'{"switch":"sw1","src_ip":"10.0.0.1","dst_ip":"10.0.0.2","src_port":1,"dst_port":2,'
    b'"bytes":1,"owner":"x"}',
    b'{"switch":"sw1","src_ip":1,"dst_ip":"10.0.0.2","src_port":1,"dst_port":2,"bytes":1}',
    b"",
    b'{"switch":"sw1"} {"switch":"sw2"}',
]
FLOW_LINES = st.sampled_from(FLOW_EXAMPLES)


def flows_per_line(block: bytes, first: int) -> list[FlowRow] | None:
    return per_line_rows(flow_row, block, first, NOW, limits())


@settings(max_examples=2000)
@given(st.lists(FLOW_LINES, min_size=1, max_size=6), st.integers(0, 10))
def test_flow_blocks_decode_as_the_per_line_path_does(lines: list[bytes], first: int) -> None:
    block = b"\n".join(lines)
    fast = flow_rows(block, first, NOW, limits())
    expected = flows_per_line(block, first)
    if fast is not None:
        assert fast == expected
    if expected is None:
        assert fast is None


def test_ordinary_flows_take_the_fast_path() -> None:
    block = b"\n".join(FLOW_EXAMPLES[:4])
    fast = flow_rows(block, 0, NOW, limits())
    assert fast is not None
    assert fast == flows_per_line(block, 0)
