"""router/protocols/proto_json.py: an object wherever protobuf's JSON mapping expects a
message, checked before json_format (which took a string for an empty message)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import orjson
import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from router.errors import BadRequest
from router.protocols import otlp
from router.protocols.proto_json import shape_problem

REQUEST = ExportLogsServiceRequest.DESCRIPTOR
NOW = datetime(2026, 11, 25, 13, tzinfo=UTC)


def records(record: object) -> dict[str, object]:
    return {"resourceLogs": [{"scopeLogs": [{"logRecords": [record]}]}]}


@pytest.mark.parametrize(
    ("document", "problem"),
    [
        ({"resourceLogs": ["AAA"]}, "resourceLogs[0] is not an object"),
        ({"resourceLogs": [{"resource": "x"}]}, "resourceLogs[0].resource is not an object"),
        ({"resource_logs": [{"scope_logs": "x"}]}, "resource_logs[0].scope_logs is not a list"),
        (
            records({"body": "text"}),
            "resourceLogs[0].scopeLogs[0].logRecords[0].body is not an object",
        ),
        (
            records({"attributes": [{"key": "a", "value": "v"}]}),
            "resourceLogs[0].scopeLogs[0].logRecords[0].attributes[0].value is not an object",
        ),
        (
            records({"body": {"arrayValue": {"values": [{"stringValue": "a"}, 1]}}}),
            "resourceLogs[0].scopeLogs[0].logRecords[0].body.arrayValue.values[1] is not an object",
        ),
        (
            records({"severityNumber": False}),
            "resourceLogs[0].scopeLogs[0].logRecords[0].severityNumber is not a number",
        ),
        (
            records({"severityNumber": 2.5}),
            "resourceLogs[0].scopeLogs[0].logRecords[0].severityNumber is not an integer",
        ),
        (
            records({"body": {"intValue": True}}),
            "resourceLogs[0].scopeLogs[0].logRecords[0].body.intValue is not a number",
        ),
    ],
)
def test_a_value_where_a_message_belongs_is_named(document: object, problem: str) -> None:
    assert shape_problem(document, REQUEST) == problem
    with pytest.raises(BadRequest, match=re.escape(problem)):
        otlp.decode_json(orjson.dumps(document), ("service.name",), NOW)


def test_a_document_that_is_no_object_is_named() -> None:
    assert shape_problem([], REQUEST) == "body is not an object"


@pytest.mark.parametrize(
    "document",
    [
        {},
        {"resourceLogs": None},
        {"resourceLogs": [{"resource": None, "scopeLogs": []}]},
        records({"body": {"stringValue": "text"}, "severityNumber": 9, "unknownField": "x"}),
        records({"body": {"boolValue": True}, "severityNumber": "SEVERITY_NUMBER_INFO"}),
        records({"body": {"kvlistValue": {"values": [{"key": "k", "value": {"intValue": 1}}]}}}),
    ],
)
def test_objects_and_nulls_where_messages_belong_pass(document: object) -> None:
    assert shape_problem(document, REQUEST) is None
