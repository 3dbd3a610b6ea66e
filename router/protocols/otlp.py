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
import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, NamedTuple

import orjson
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs

from router.errors import BadRequest
from router.protocols import proto_json, wire
from router.protocols.allowance import Allowance, Steps, run
from router.protocols.shipped import Message
from router.settings import IngestSettings
from router.timestamps import from_unix_nanos

# google.rpc.Status's code for a request that cannot be read.
INVALID_ARGUMENT = 3
# How refusals of too many records name them.
LABEL = "resourceLogs"
# Field numbers: ExportLogsServiceRequest.resource_logs, ResourceLogs.scope_logs,
# ScopeLogs.log_records.
_RESOURCE_LOGS, _SCOPE_LOGS, _LOG_RECORDS = 1, 2, 2


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


Data = bytes | bytearray | memoryview


def decode_protobuf(
    data: Data, owner_attributes: Sequence[str], now: datetime, allowance: Allowance | None = None
) -> list[Group]:
    """The request's messages, each record measured and counted against ``allowance`` (by
    default the write API's default limits, nothing charged) before it is parsed."""
    return run(protobuf_steps(data, owner_attributes, now, allowance))


def protobuf_steps(
    data: Data, owner_attributes: Sequence[str], now: datetime, allowance: Allowance | None = None
) -> Steps[list[Group]]:
    """``decode_protobuf`` in steps (router/protocols/allowance.py)."""
    allowance = allowance or Allowance.of(IngestSettings(), label=LABEL)
    view = memoryview(data)
    try:
        resources = _wire_resources(view, allowance)
        return (yield from _groups(resources, owner_attributes, now, allowance))
    except (wire.WireError, DecodeError) as exc:
        raise BadRequest(f"the body is not an ExportLogsServiceRequest: {exc}", "body") from None


def decode_json(
    data: Data, owner_attributes: Sequence[str], now: datetime, allowance: Allowance | None = None
) -> list[Group]:
    """OTLP's JSON encoding: protobuf's JSON mapping (lowerCamelCase keys, or the fields' own
    names; 64-bit integers as numbers or strings; enums as numbers), but traceId and spanId in
    hex. Unknown fields are ignored, as OTLP asks of receivers. Records and attributes are
    counted against ``allowance`` before the request is built."""
    return run(json_steps(data, owner_attributes, now, allowance))


def json_steps(
    data: Data, owner_attributes: Sequence[str], now: datetime, allowance: Allowance | None = None
) -> Steps[list[Group]]:
    """``decode_json`` in steps."""
    allowance = allowance or Allowance.of(IngestSettings(), label=LABEL)
    try:
        document = orjson.loads(data)
        if not isinstance(document, dict):
            raise BadRequest("the body must be a JSON object", "body")
        # A copy counts: the records are counted again, by ``allowance``, as they are decoded.
        _count(document, dataclasses.replace(allowance))
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
    return (yield from _groups(_parsed_resources(request), owner_attributes, now, allowance))


# A record before it is parsed: its length in protobuf, and how to parse it.
Pending = tuple[int, Callable[[], Any]]
# A ScopeLogs without its records, and its records; a ResourceLogs without its ScopeLogs, and
# them.
Scope = tuple[Any, Iterable[Pending]]
Resource = tuple[Any, Iterable[Scope]]


def _wire_resources(view: memoryview, allowance: Allowance) -> Iterator[Resource]:
    _, resources = wire.split(view, 0, len(view), _RESOURCE_LOGS)
    for r, bounds in enumerate(resources):
        rest, scopes = wire.split(view, bounds.start, bounds.stop, _SCOPE_LOGS)
        allowance.part(f"resourceLogs[{r}].resource", sum(map(len, rest)))
        resource_logs = ResourceLogs.FromString(wire.join(view, rest))
        yield resource_logs, _wire_scopes(view, scopes, r, allowance)


def _wire_scopes(
    view: memoryview, scopes: list[range], r: int, allowance: Allowance
) -> Iterator[Scope]:
    for s, bounds in enumerate(scopes):
        rest, records = wire.split(view, bounds.start, bounds.stop, _LOG_RECORDS)
        allowance.part(f"resourceLogs[{r}].scopeLogs[{s}].scope", sum(map(len, rest)))
        scope_logs = ScopeLogs.FromString(wire.join(view, rest))
        yield (
            scope_logs,
            (
                (len(b), functools.partial(LogRecord.FromString, bytes(view[b.start : b.stop])))
                for b in records
            ),
        )


def _parsed_resources(request: Any) -> Iterator[Resource]:
    for resource_logs in request.resource_logs:
        scopes = [(scope, _parsed(scope.log_records)) for scope in resource_logs.scope_logs]
        yield resource_logs, scopes


def _parsed(records: Iterable[Any]) -> Iterator[Pending]:
    for record in records:
        yield record.ByteSize(), functools.partial(_same, record)


def _same(record: Any) -> Any:
    return record


def _count(document: Any, counter: Allowance) -> None:
    """The records and attributes of a JSON request counted before it is built; a body of
    another shape is left to the parser to refuse."""
    for r, resource in enumerate(_items(document, "resourceLogs", "resource_logs")):
        where = f"resourceLogs[{r}]"
        _count_attributes(resource.get("resource"), f"{where}.resource.attributes", counter)
        for s, scope in enumerate(_items(resource, "scopeLogs", "scope_logs")):
            label = f"{where}.scopeLogs[{s}]"
            _count_attributes(scope.get("scope"), f"{label}.scope.attributes", counter)
            for i, record in enumerate(_items(scope, "logRecords", "log_records")):
                counter.record(f"{label}.logRecords[{i}]", 0)
                _count_attributes(record, f"{label}.logRecords[{i}].attributes", counter)


def _count_attributes(parent: Any, where: str, counter: Allowance) -> None:
    counter.attributes(where, len(_items(parent, "attributes")))


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


def _groups(
    resources: Iterable[Resource],
    owner_attributes: Sequence[str],
    now: datetime,
    allowance: Allowance,
) -> Steps[list[Group]]:
    groups: list[Group] = []
    for r, (resource_logs, scopes) in enumerate(resources):
        where = f"resourceLogs[{r}].resource.attributes"
        resource = _attributes(resource_logs.resource.attributes, where, allowance)
        owner = next(
            (resource[name] for name in owner_attributes if isinstance(resource.get(name), str)),
            None,
        )
        common: dict[str, Any] = {"resource": resource} if resource else {}
        for s, (scope_logs, records) in enumerate(scopes):
            label = f"resourceLogs[{r}].scopeLogs[{s}]"
            scope = _scope(scope_logs.scope, f"{label}.scope.attributes", allowance)
            shared = {**common, "scope": scope} if scope else common
            messages = []
            for i, (size, parse) in enumerate(records):
                allowance.record(f"{label}.logRecords[{i}]", size)
                record = parse()
                where = f"{label}.logRecords[{i}].attributes"
                message = _message(record, owner, owner_attributes, shared, now, where, allowance)
                messages.append(message)
                if allowance.decoded(size, len(record.attributes)):
                    yield
            groups.append(Group(f"{label}.logRecords", r, messages))
    return groups


def _scope(scope: Any, where: str, allowance: Allowance) -> dict[str, Any]:
    described: dict[str, Any] = {
        k: getattr(scope, k) for k in ("name", "version") if getattr(scope, k)
    }
    if scope.attributes:
        described["attributes"] = _attributes(scope.attributes, where, allowance)
    return described


# Fields of a log record kept in attrs as they are, when set.
_PLAIN_FIELDS = ("severity_number", "severity_text", "flags", "event_name")


def _message(
    record: Any,
    owner: str | None,
    owner_attributes: Sequence[str],
    shared: dict[str, Any],
    now: datetime,
    where: str,
    allowance: Allowance,
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
        attributes = attrs["attributes"] = _attributes(record.attributes, where, allowance)
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


def _attributes(pairs: Any, where: str, allowance: Allowance) -> dict[str, Any]:
    allowance.attributes(where, len(pairs))
    return _pairs(pairs)


def _pairs(pairs: Any) -> dict[str, Any]:
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
        return _pairs(value.kvlist_value.values)
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
