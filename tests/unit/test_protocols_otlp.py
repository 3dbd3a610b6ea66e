"""router/protocols/otlp.py: OTLP logs (protobuf and JSON) as messages; its answers."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

import orjson
import pytest
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

from router.errors import BadRequest
from router.protocols import otlp
from router.protocols.shipped import Message

OWNER_ATTRIBUTES = ("service.name",)
NOW = datetime(2026, 11, 25, 13, tzinfo=UTC)
TS = datetime(2026, 11, 25, 12, 0, 0, 123456, tzinfo=UTC)
NANOS = 1795608000_123456789

REQUEST_JSON = {
    "resourceLogs": [
        {
            "resource": {
                "attributes": [
                    {"key": "service.name", "value": {"stringValue": "checkout"}},
                    {"key": "host.cpus", "value": {"intValue": "4"}},
                ]
            },
            "scopeLogs": [
                {
                    "scope": {"name": "app.orders", "version": "1.2"},
                    "logRecords": [
                        {
                            "timeUnixNano": str(NANOS),
                            "severityNumber": 9,
                            "severityText": "INFO",
                            "body": {"stringValue": "order 7 paid"},
                            "attributes": [
                                {"key": "order", "value": {"intValue": 7}},
                                {"key": "ok", "value": {"boolValue": True}},
                                {
                                    "key": "items",
                                    "value": {
                                        "arrayValue": {
                                            "values": [
                                                {"stringValue": "a"},
                                                {"doubleValue": 1.5},
                                            ]
                                        }
                                    },
                                },
                            ],
                            "traceId": "5b8efff798038103d269b633813fc60c",
                            "spanId": "eee19b7ec3c1b174",
                            "flags": 1,
                        },
                        {
                            "observedTimeUnixNano": NANOS,
                            "body": {"kvlistValue": {"values": [{"key": "k", "value": {}}]}},
                        },
                        {"body": {"bytesValue": "AAE="}},
                    ],
                }
            ],
        },
        {"scopeLogs": [{"logRecords": [{"body": {"stringValue": "whose?"}}]}]},
    ]
}
RESOURCE = {"service.name": "checkout", "host.cpus": 4}
SCOPE = {"name": "app.orders", "version": "1.2"}
EXPECTED = [
    otlp.Group(
        "resourceLogs[0].scopeLogs[0].logRecords",
        0,
        [
            Message(
                "checkout",
                TS,
                "order 7 paid",
                {
                    "severity_number": 9,
                    "severity_text": "INFO",
                    "trace_id": "5b8efff798038103d269b633813fc60c",
                    "span_id": "eee19b7ec3c1b174",
                    "flags": 1,
                    "attributes": {"order": 7, "ok": True, "items": ["a", 1.5]},
                    "resource": RESOURCE,
                    "scope": SCOPE,
                },
            ),
            Message("checkout", TS, '{"k":null}', {"resource": RESOURCE, "scope": SCOPE}),
            Message("checkout", NOW, '"AAE="', {"resource": RESOURCE, "scope": SCOPE}),
        ],
    ),
    otlp.Group("resourceLogs[1].scopeLogs[0].logRecords", 1, [Message(None, NOW, "whose?", None)]),
]


def as_protobuf(document: dict) -> bytes:
    """The JSON request in protobuf (ids from hex, as protobuf's own JSON mapping wants)."""
    request = ExportLogsServiceRequest()
    decoded = orjson.loads(orjson.dumps(document))
    otlp._ids_from_hex(decoded)
    json_format.ParseDict(decoded, request)
    return bytes(request.SerializeToString())


def test_json_and_protobuf_requests_become_the_same_messages() -> None:
    assert otlp.decode_json(orjson.dumps(REQUEST_JSON), OWNER_ATTRIBUTES, NOW) == EXPECTED
    assert otlp.decode_protobuf(as_protobuf(REQUEST_JSON), OWNER_ATTRIBUTES, NOW) == EXPECTED


def test_the_owner_falls_back_to_the_record_and_follows_the_setting() -> None:
    record = {"attributes": [{"key": "tenant.owner", "value": {"stringValue": "acme"}}]}
    document = {"resourceLogs": [{"scopeLogs": [{"logRecords": [record]}]}]}
    [group] = otlp.decode_json(orjson.dumps(document), ("service.name", "tenant.owner"), NOW)
    assert group.messages[0].owner == "acme"


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b"[]",
        b'{"resourceLogs": 1}',
        b'{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"traceId": "xyz"}]}]}]}',
        b'{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"timeUnixNano": "soon"}]}]}]}',
        b'{"resourceLogs": [{"scopeLogs": [{"logRecords": [{"flags": -1}]}]}]}',
    ],
)
def test_bad_json_is_a_bad_request(body: bytes) -> None:
    with pytest.raises(BadRequest):
        otlp.decode_json(body, OWNER_ATTRIBUTES, NOW)


def test_bad_protobuf_is_a_bad_request() -> None:
    with pytest.raises(BadRequest, match="not an ExportLogsServiceRequest"):
        otlp.decode_protobuf(b"\x0a\x05\x12\x03\xff", OWNER_ATTRIBUTES, NOW)


def test_answers_in_both_encodings() -> None:
    assert otlp.answer(0, "", protobuf=True) == b""
    assert otlp.answer(0, "", protobuf=False) == b"{}"
    response = ExportLogsServiceResponse.FromString(otlp.answer(2, "two bad", protobuf=True))
    assert response.partial_success.rejected_log_records == 2
    assert response.partial_success.error_message == "two bad"
    assert orjson.loads(otlp.answer(2, "two bad", protobuf=False)) == {
        "partialSuccess": {"rejectedLogRecords": 2, "errorMessage": "two bad"}
    }
    status = otlp.Status.FromString(otlp.status("unreadable", protobuf=True))
    assert (status.code, status.message) == (otlp.INVALID_ARGUMENT, "unreadable")
    assert orjson.loads(otlp.status("unreadable", protobuf=False)) == {
        "code": 3,
        "message": "unreadable",
    }


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_decode_or_are_a_bad_request(data: bytes) -> None:
    for decode in (otlp.decode_protobuf, otlp.decode_json):
        with contextlib.suppress(BadRequest):
            decode(data, OWNER_ATTRIBUTES, NOW)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8) | st.floats(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
KEYS = st.sampled_from(
    ["resourceLogs", "scopeLogs", "logRecords", "body", "attributes", "traceId", "timeUnixNano"]
)


@settings(max_examples=300, deadline=None)
@given(st.recursive(JSONISH, lambda inner: st.dictionaries(KEYS, inner, max_size=3), max_leaves=20))
def test_any_json_decodes_or_is_a_bad_request(document: object) -> None:
    try:
        body = orjson.dumps(document)
    except orjson.JSONEncodeError:
        return
    with contextlib.suppress(BadRequest):
        otlp.decode_json(body, OWNER_ATTRIBUTES, NOW)
