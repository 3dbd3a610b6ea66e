"""OTLP/HTTP logs: POST /v1/logs (OpenTelemetry SDKs and the Collector's otlp_http exporter).
Records that break the audit rules are rejected one by one (partial_success) while the others
are written; a body that cannot be read is a 400 with a google.rpc.Status; both in the
request's encoding."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from router import clock
from router.api import shipped
from router.api.deps import RuntimeDep
from router.api.ingest import UnsupportedMediaType
from router.api.responses import described
from router.auth.dependency import AuditWrite
from router.errors import BadRequest, Invalid, excerpt
from router.protocols import otlp

router = APIRouter(prefix="/v1", tags=["shippers"])

BINARY = {"type": "string", "format": "binary"}
# protobuf's JSON mapping: a 64-bit integer as a number or a string of digits.
UNIX_NANOS = {
    "type": ["string", "integer"],
    "pattern": "^[0-9]+$",
    "minimum": 0,
    "maximum": 2**64 - 1,
}
# An enum as its number, or a name (json_format skips a name it does not know).
ENUM = {"type": ["integer", "string"], "minimum": -(2**31), "maximum": 2**31 - 1}
HEX = {"type": "string", "pattern": "^(?:[0-9a-fA-F]{2})*$"}
KEY_VALUES = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"key": {"type": "string"}, "value": {"type": "object"}},
    },
}
REQUEST_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "ExportLogsServiceRequest in OTLP's JSON encoding (the outline; "
    "opentelemetry-proto defines it all)",
    "properties": {
        "resourceLogs": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "resource": {"type": "object", "properties": {"attributes": KEY_VALUES}},
                    "scopeLogs": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "scope": {"type": "object"},
                                "logRecords": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "properties": {
                                            "timeUnixNano": UNIX_NANOS,
                                            "severityNumber": ENUM,
                                            "severityText": {"type": "string"},
                                            "body": {"type": "object"},
                                            "attributes": KEY_VALUES,
                                            "traceId": HEX,
                                            "spanId": HEX,
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        }
    },
}
RESPONSE_JSON_SCHEMA = {
    "type": "object",
    "description": "ExportLogsServiceResponse",
    "properties": {
        "partialSuccess": {
            "type": "object",
            "properties": {
                "rejectedLogRecords": {"type": "integer"},
                "errorMessage": {"type": "string"},
            },
            "required": ["rejectedLogRecords", "errorMessage"],
            "additionalProperties": False,
        }
    },
    "additionalProperties": False,
}
STATUS_JSON_SCHEMA = {
    "type": "object",
    "description": "google.rpc.Status",
    "properties": {"code": {"type": "integer"}, "message": {"type": "string"}},
    "required": ["code", "message"],
    "additionalProperties": False,
}


def _proto3_json(schema: dict[str, Any]) -> dict[str, Any]:
    """protobuf's JSON mapping (OTLP's) reads null as a field's default: any field may be
    null, though not an element of a list."""
    shown = dict(schema)
    if "items" in shown:
        shown["items"] = _proto3_json(shown["items"])
    if "properties" in shown:
        shown["properties"] = {
            name: _nullable(_proto3_json(field)) for name, field in shown["properties"].items()
        }
    return shown


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    return {**schema, "type": [*kinds, "null"]}


EXPORT_BODY = {
    "requestBody": {
        "required": True,
        "description": "An ExportLogsServiceRequest (opentelemetry-proto), in protobuf or in "
        "OTLP's JSON encoding; gzip allowed as Content-Encoding",
        "content": {
            shipped.PROTOBUF: {"schema": BINARY},
            "application/json": {"schema": _proto3_json(REQUEST_JSON_SCHEMA)},
        },
    }
}
EXPORT_ANSWERS = described(
    {
        401: "No valid API token (Bearer, or the password of Basic auth)",
        403: "The token lacks audit:write, or a resource's owner belongs to another tenant "
        "or is reserved for the platform, shardlog.* (field resourceLogs[N].owner); nothing "
        "written",
        409: "The same export is being written by an earlier attempt still; see Retry-After",
        413: "Body over the limit, a gzip body that inflates past it, more than "
        "SHARDLOG_INGEST__MAX_RECORDS log records, or a record longer or with more attributes "
        "than any record can have (field resourceLogs[N].scopeLogs[M].logRecords[K])",
        415: "A content type other than application/x-protobuf or application/json, or an "
        "encoding other than gzip",
        422: "A query parameter with a NUL character",
        429: "Over the token's rates, or the router holds too many request bytes; see Retry-After",
        503: "A shard could not take its rows; see Retry-After",
    }
)


def _in_either_encoding(description: str, json_schema: dict[str, Any]) -> dict[str, Any]:
    content = {shipped.PROTOBUF: {"schema": BINARY}, "application/json": {"schema": json_schema}}
    return {"description": description, "content": content}


EXPORT_ANSWERS[200] = _in_either_encoding(
    "Written: an ExportLogsServiceResponse in the request's encoding, with partial_success "
    "counting and naming the records rejected (the others are written)",
    RESPONSE_JSON_SCHEMA,
)
EXPORT_ANSWERS[400] = _in_either_encoding(
    "A body that is no ExportLogsServiceRequest: a google.rpc.Status in the request's "
    "encoding; nothing written",
    STATUS_JSON_SCHEMA,
)


@router.post(
    "/logs",
    summary="OTLP/HTTP logs export (protobuf or JSON)",
    response_class=Response,
    responses=EXPORT_ANSWERS,
    openapi_extra=EXPORT_BODY,
)
async def export_logs(request: Request, caller: AuditWrite, runtime: RuntimeDep) -> Response:
    media = shipped.media_type(request)
    if media not in (shipped.PROTOBUF, "application/json"):
        raise UnsupportedMediaType(
            f"content type {excerpt(media)} is not {shipped.PROTOBUF} or application/json",
            "content-type",
        )
    protobuf = media == shipped.PROTOBUF
    owner_attributes = runtime.settings.otlp.owner_attributes
    try:
        async with shipped.received(request, runtime, caller, "otlp") as body:
            decode = otlp.protobuf_steps if protobuf else otlp.json_steps
            groups = await body.decoded(decode, otlp.LABEL, owner_attributes, clock.now())
            outcome = await shipped.write(
                runtime, caller, "otlp", groups, "resourceLogs", body.digest
            )
    except (BadRequest, Invalid) as exc:
        return Response(otlp.status(exc.message, protobuf), status_code=400, media_type=media)
    answer = otlp.answer(len(outcome.refused), shipped.refusals(outcome.refused), protobuf)
    return Response(answer, media_type=media)
