"""router/protocols/loki.py and compression.py: Loki pushes as messages; strict labels; bounded
inflation."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

import cramjam
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router.errors import BadRequest, TooLarge
from router.protocols import compression, loki
from router.protocols.shipped import Message

OWNERS = ("owner", "service_name", "job")
TS = datetime(2026, 11, 25, 12, 0, 0, 123456, tzinfo=UTC)
NANOS = 1795608000_123456789  # 2026-11-25T12:00:00.123456789Z


def push_bytes(streams: list[tuple[str, list[tuple[int, int, str, dict[str, str]]]]]) -> bytes:
    request = loki.PushRequest()
    for labels, entries in streams:
        stream = request.streams.add(labels=labels)
        for seconds, nanos, line, metadata in entries:
            entry = stream.entries.add(line=line)
            entry.timestamp.seconds, entry.timestamp.nanos = seconds, nanos
            for name, value in metadata.items():
                entry.structuredMetadata.add(name=name, value=value)
    return bytes(request.SerializeToString())


def test_protobuf_streams_become_messages_with_owner_labels_and_metadata() -> None:
    body = push_bytes(
        [
            ('{job="api", owner="acme", env="prod"}', [(1795608000, 123456789, "one", {})]),
            ('{job="worker"}', [(1795608000, 123456999, "two", {"trace_id": "abc"})]),
        ]
    )
    streams = loki.decode_protobuf(body, OWNERS)
    assert streams == [
        (
            "streams[0].entries",
            [Message("acme", TS, "one", {"labels": {"job": "api", "env": "prod"}})],
        ),
        ("streams[1].entries", [Message("worker", TS, "two", {"metadata": {"trace_id": "abc"}})]),
    ]


def test_json_pushes_read_like_protobuf_ones() -> None:
    push = {
        "streams": [
            {
                "stream": {"service_name": "billing", "level": "info"},
                "values": [[str(NANOS), "a"], [str(NANOS), "b", {"user": "bob"}]],
            }
        ]
    }
    [(label, messages)] = loki.decode_json(orjson.dumps(push), OWNERS)
    assert label == "streams[0].values"
    labels = {"level": "info"}
    assert messages == [
        Message("billing", TS, "a", {"labels": labels}),
        Message("billing", TS, "b", {"labels": labels, "metadata": {"user": "bob"}}),
    ]


@pytest.mark.parametrize(
    ("text", "labels"),
    [
        ("{}", {}),
        ('{a="1"}', {"a": "1"}),
        (' { a = "1" , _b="x y",}  ', {"a": "1", "_b": "x y"}),
        (r'{a="q\"uote\\ \n\t\x41\101\u00e9\U0001F600"}', {"a": 'q"uote\\ \n\tAAé😀'}),
        ('{path="/var/log/{x}.log"}', {"path": "/var/log/{x}.log"}),
    ],
)
def test_labels_parse(text: str, labels: dict[str, str]) -> None:
    assert loki.parse_labels(text) == labels


@pytest.mark.parametrize(
    "text",
    [
        "",
        'a="1"',
        '{a="1"',
        '{a="1"} x',
        "{a=1}",
        '{1a="1"}',
        '{a="1" b="2"}',
        '{a="1", a="2"}',
        r'{a="\q"}',
        r'{a="\400"}',
        r'{a="\xff"}',
        r'{a="\ud800"}',
        "{a='1'}",
        '{a="1",,}',
    ],
)
def test_labels_are_strict(text: str) -> None:
    with pytest.raises(loki.LabelError):
        loki.parse_labels(text)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{", "body"),
        (b"[]", "body"),
        (b'{"streams": [1]}', "streams[0]"),
        (b'{"streams": [{"stream": {"job": 1}, "values": []}]}', "streams[0].stream"),
        (b'{"streams": [{"stream": {"a-b": "x"}, "values": []}]}', "streams[0].stream"),
        (b'{"streams": [{"stream": {"env": "x"}, "values": []}]}', "streams[0].stream"),
        (b'{"streams": [{"stream": {"job": "x"}, "values": {}}]}', "streams[0].values"),
        (b'{"streams": [{"stream": {"job": "x"}, "values": [["1"]]}]}', "streams[0].values[0]"),
        (
            b'{"streams": [{"stream": {"job": "x"}, "values": [["-1", "l"]]}]}',
            "streams[0].values[0]",
        ),
        (
            b'{"streams": [{"stream": {"job": "x"}, "values": [["1", 2]]}]}',
            "streams[0].values[0]",
        ),
        (
            b'{"streams": [{"stream": {"job": "x"}, "values": [["1" , "l", {"a": 1}]]}]}',
            "streams[0].values[0][2]",
        ),
        (
            b'{"streams": [{"stream": {"job": "x"}, "values": [["' + b"9" * 30 + b'", "l"]]}]}',
            "streams[0].values[0]",
        ),
    ],
)
def test_bad_json_pushes_name_the_stream_or_entry(body: bytes, field: str) -> None:
    with pytest.raises(BadRequest) as raised:
        loki.decode_json(body, OWNERS)
    assert raised.value.field == field
    assert raised.value.message.startswith(field) or field == "body"


def test_bad_protobuf_pushes_name_the_stream_or_entry() -> None:
    with pytest.raises(BadRequest, match="not a Loki PushRequest"):
        loki.decode_protobuf(b"\x0a\x05\x0a\x03\xff\xfe\xfd", OWNERS)
    with pytest.raises(BadRequest) as raised:
        loki.decode_protobuf(push_bytes([('{job="a"', [])]), OWNERS)
    assert raised.value.field == "streams[0].labels"
    with pytest.raises(BadRequest) as raised:
        loki.decode_protobuf(push_bytes([('{job="a"}', [(-(10**12), 0, "x", {})])]), OWNERS)
    assert raised.value.field == "streams[0].entries[0].timestamp"


def _free(amount: int) -> None:
    """No in-flight budget to charge."""


def test_snappy_inflates_within_the_limit_only() -> None:
    data = b"x" * 100_000
    snappy = bytes(cramjam.snappy.compress_raw(data))
    assert compression.unsnappy(snappy, 100_000, _free) == data
    with pytest.raises(TooLarge):
        compression.unsnappy(snappy, 99_999, _free)
    # A length prefix that promises little, and data that is no snappy block.
    with pytest.raises(BadRequest):
        compression.unsnappy(b"\x05" + b"\xff" * 10, 100, _free)
    with pytest.raises(BadRequest):
        compression.unsnappy(b"\xff\xff\xff\xff\xff\xff", 100, _free)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_decode_or_are_a_bad_request(data: bytes) -> None:
    for decode in (loki.decode_protobuf, loki.decode_json):
        with contextlib.suppress(BadRequest):
            decode(data, OWNERS)
    with contextlib.suppress(BadRequest, TooLarge):
        compression.unsnappy(data, 1000, _free)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_any_label_text_parses_or_is_a_label_error(text: str) -> None:
    try:
        labels = loki.parse_labels(text)
    except loki.LabelError:
        return
    assert all(loki.LABEL_NAME.fullmatch(name) for name in labels)
