"""OTLP/HTTP logs (POST /v1/logs): an ExportLogsServiceRequest in protobuf or in OTLP's JSON
encoding as messages, one list per ScopeLogs; the answers OTLP/HTTP defines (the
ExportLogsServiceResponse with its partial_success, and google.rpc.Status for a body that
cannot be read) in the request's encoding.

Owner: the first of ``owner_attributes`` that the resource has as a string attribute, else
the log record. content: the body (a string as it is, any other kind as JSON text, none as
""). ts: time_unix_nano, else observed_time_unix_nano, else now, kept to the microsecond.
attrs: severity, trace context, the record's, resource's and scope's attributes."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import orjson
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

from router.errors import BadRequest
from router.protocols import proto_json
from router.protocols.shipped import Message
from router.timestamps import from_unix_nanos

# google.rpc.Status's code for a request that cannot be read.
INVALID_ARGUMENT = 3


def _status_class() -> Any:
    """google.rpc.Status (code, message; the details a server may add are left out), from a
    descriptor here: googleapis-common-protos is no dependency of the router."""
    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(
        name="shardlog/google/rpc/status.proto", package="google.rpc", syntax="proto3"
    )
    status = proto.message_type.add(name="Status")
    status.field.add(name="code", number=1, type=field.TYPE_INT32, label=field.LABEL_OPTIONAL)
    status.field.add(name="message", number=2, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("google.rpc.Status"))


Status = _status_class()


class Group(NamedTuple):
    """The messages of one ScopeLogs: ``label`` names them in errors, ``resource`` is the
    position of their ResourceLogs."""

    label: str
    resource: int
    messages: list[Message]


def decode_protobuf(data: bytes, owner_attributes: Sequence[str], now: datetime) -> list[Group]:
    request = ExportLogsServiceRequest()
    try:
        request.ParseFromString(data)
    except DecodeError as exc:
        raise BadRequest(f"the body is not an ExportLogsServiceRequest: {exc}", "body") from None
    return _groups(request, owner_attributes, now)


def decode_json(data: bytes, owner_attributes: Sequence[str], now: datetime) -> list[Group]:
    """OTLP's JSON encoding: protobuf's JSON mapping (lowerCamelCase keys, or the fields' own
    names; 64-bit integers as numbers or strings; enums as numbers), but traceId and spanId in
    hex. Unknown fields are ignored, as OTLP asks of receivers."""
    try:
        document = orjson.loads(data)
        if not isinstance(document, dict):
            raise BadRequest("the body must be a JSON object", "body")
        _ids_from_hex(document)
        problem = proto_json.shape_problem(document, ExportLogsServiceRequest.DESCRIPTOR)
        if problem is not None:
            raise BadRequest(f"the body is not an ExportLogsServiceRequest: {problem}", "body")
        request = json_format.ParseDict(
            document, ExportLogsServiceRequest(), ignore_unknown_fields=True
        )
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the body is not JSON: {exc.msg}", "body") from None
    except (json_format.ParseError, ValueError, TypeError, RecursionError) as exc:
        raise BadRequest(f"the body is not an ExportLogsServiceRequest: {exc}", "body") from None
    return _groups(request, owner_attributes, now)


def _ids_from_hex(document: Any) -> None:
    """traceId and spanId from OTLP's hex to the base64 of protobuf's JSON mapping, in place;
    a body of another shape is left to the parser to refuse."""
    for resource in _items(document, "resourceLogs", "resource_logs"):
        for scope in _items(resource, "scopeLogs", "scope_logs"):
            for record in _items(scope, "logRecords", "log_records"):
                for key in ("traceId", "trace_id", "spanId", "span_id"):
                    value = record.get(key)
                    if isinstance(value, str):
                        try:
                            raw = bytes.fromhex(value)
                        except ValueError:
                            raise BadRequest(
                                f"{key} must be hexadecimal, as OTLP/JSON has it", key
                            ) from None
                        record[key] = base64.b64encode(raw).decode()


def _items(parent: Any, *keys: str) -> list[dict[str, Any]]:
    if not isinstance(parent, dict):
        return []
    for key in keys:
        value = parent.get(key)
        if isinstance(value, list):
            return [item for item in value if isinstance(item, dict)]
    return []


def _groups(request: Any, owner_attributes: Sequence[str], now: datetime) -> list[Group]:
    groups: list[Group] = []
    for r, resource_logs in enumerate(request.resource_logs):
        resource = _attributes(resource_logs.resource.attributes)
        owner = next(
            (resource[name] for name in owner_attributes if isinstance(resource.get(name), str)),
            None,
        )
        common: dict[str, Any] = {"resource": resource} if resource else {}
        for s, scope_logs in enumerate(resource_logs.scope_logs):
            scope = _scope(scope_logs.scope)
            shared = {**common, "scope": scope} if scope else common
            messages = [
                _message(record, owner, owner_attributes, shared, now)
                for record in scope_logs.log_records
            ]
            groups.append(Group(f"resourceLogs[{r}].scopeLogs[{s}].logRecords", r, messages))
    return groups


def _scope(scope: Any) -> dict[str, Any]:
    described: dict[str, Any] = {
        k: getattr(scope, k) for k in ("name", "version") if getattr(scope, k)
    }
    if scope.attributes:
        described["attributes"] = _attributes(scope.attributes)
    return described


# Fields of a log record kept in attrs as they are, when set.
_PLAIN_FIELDS = ("severity_number", "severity_text", "flags", "event_name")


def _message(
    record: Any,
    owner: str | None,
    owner_attributes: Sequence[str],
    shared: dict[str, Any],
    now: datetime,
) -> Message:
    attrs: dict[str, Any] = {}
    for name in _PLAIN_FIELDS:
        value = getattr(record, name)
        if value:
            attrs[name] = value
    for name in ("trace_id", "span_id"):
        value = getattr(record, name)
        if value:
            attrs[name] = value.hex()
    if record.attributes:
        attributes = attrs["attributes"] = _attributes(record.attributes)
        if owner is None:
            owner = next(
                (attributes[n] for n in owner_attributes if isinstance(attributes.get(n), str)),
                None,
            )
    if shared:
        attrs.update(shared)
    nanos = record.time_unix_nano or record.observed_time_unix_nano
    ts = from_unix_nanos(nanos) if nanos else now
    return Message(owner, ts, _content(record), attrs or None)


def _content(record: Any) -> str:
    if not record.HasField("body"):
        return ""
    body = record.body
    if body.WhichOneof("value") == "string_value":
        return str(body.string_value)
    return orjson.dumps(_value(body)).decode()


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: Any) -> Any:
    """An AnyValue as JSON: bytes in base64, as OTLP/JSON has them."""
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind in ("int_value", "bool_value", "double_value"):
        return getattr(value, kind)
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()
    return None  # unset, or an index into a dictionary that logs do not have


# --- answers -------------------------------------------------------------------------------


def answer(rejected: int, error_message: str, protobuf: bool) -> bytes:
    """The ExportLogsServiceResponse: empty when every record was taken."""
    if protobuf:
        response = ExportLogsServiceResponse()
        if rejected or error_message:
            response.partial_success.rejected_log_records = rejected
            response.partial_success.error_message = error_message
        return bytes(response.SerializeToString())
    if not (rejected or error_message):
        return b"{}"
    partial = {"rejectedLogRecords": rejected, "errorMessage": error_message}
    return orjson.dumps({"partialSuccess": partial})


def status(message: str, protobuf: bool) -> bytes:
    """The google.rpc.Status of a request that cannot be read (HTTP 400)."""
    if protobuf:
        return bytes(Status(code=INVALID_ARGUMENT, message=message).SerializeToString())
    return orjson.dumps({"code": INVALID_ARGUMENT, "message": message})
