"""Loki's push API: POST /loki/api/v1/push (Promtail, Grafana Alloy's loki.write, Loki clients).
As Loki does, a push keeps its valid entries: 204 once every entry committed; an entry that
breaks the rules (or is older than its owner's retention) is ignored alone, and the answer is
400 with Loki's plain-text error naming each ignored entry (``streams[2].values[7]``) once the
others committed (a shipper does not send a 400 again, so a batch loses only what is invalid).
A body that cannot be read, or an owner the token may not write, refuses the whole push."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse

from router.api import shipped
from router.api.deps import RuntimeDep
from router.api.ingest import UnsupportedMediaType
from router.api.responses import described
from router.auth.dependency import AuditWrite
from router.errors import BadRequest, Invalid, excerpt
from router.protocols import loki

router = APIRouter(prefix="/loki/api/v1", tags=["shippers"])
# Ignored entries named in one answer; its last line counts them all.
MAX_NAMED = 10

PUSH_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["streams"],
    "properties": {
        "streams": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["stream", "values"],
                "properties": {
                    "stream": {
                        "type": "object",
                        "additionalProperties": {"type": "string"},
                        "description": "The stream's labels; one of SHARDLOG_LOKI__OWNER_LABELS "
                        "is the owner",
                    },
                    "values": {
                        "type": "array",
                        "items": {
                            "type": "array",
                            "minItems": 2,
                            "maxItems": 3,
                            "prefixItems": [
                                {"type": "string", "description": "Unix time in nanoseconds"},
                                {"type": "string", "description": "The log line"},
                                {
                                    "type": "object",
                                    "additionalProperties": {"type": "string"},
                                    "description": "Structured metadata",
                                },
                            ],
                        },
                    },
                },
            },
        }
    },
}
PUSH_BODY = {
    "requestBody": {
        "required": True,
        "description": "A Loki push: JSON (gzip allowed as Content-Encoding), or a "
        "logproto.PushRequest in protobuf compressed with snappy's block format, as Promtail "
        "and Alloy send it, or its framing format",
        "content": {
            "application/json": {"schema": PUSH_JSON_SCHEMA},
            shipped.PROTOBUF: {"schema": {"type": "string", "format": "binary"}},
        },
    }
}
PUSH_ERRORS = described(
    {
        401: "No valid API token (Bearer, or the password of Basic auth)",
        403: "The token lacks audit:write, or a stream's owner belongs to another tenant or "
        "is reserved for the platform, shardlog.* (field streams[N].owner); nothing written",
        409: "The same push is being written by an earlier attempt still; see Retry-After",
        413: "Body over the limit, a snappy or gzip body that inflates past it, more than "
        "SHARDLOG_INGEST__MAX_RECORDS entries, or an entry longer than any record can be "
        "(field streams[N].entries[M])",
        415: "A content type other than JSON or protobuf, or an encoding other than gzip",
        422: "A query parameter with a NUL character",
        429: "Over the token's rates, or the router holds too many request bytes; see Retry-After",
        503: "A shard could not take its rows; see Retry-After",
    }
)
PUSH_ERRORS[400] = {
    "description": "A body that cannot be read (nothing written), or entries that break the "
    "audit rules or are older than their owner's retention: those are ignored, the push's "
    "other entries written, and Loki's plain-text error names each ignored entry "
    "(streams[2].values[7]) and ends with 'total ignored: N out of M'",
    "content": {"text/plain": {"schema": {"type": "string"}}},
}


@router.post(
    "/push",
    summary="Loki push: log entries of labelled streams (JSON or snappy protobuf)",
    status_code=204,
    response_class=Response,
    responses=PUSH_ERRORS,
    openapi_extra=PUSH_BODY,
)
async def push(request: Request, caller: AuditWrite, runtime: RuntimeDep) -> Response:
    owner_labels = runtime.settings.loki.owner_labels
    media = shipped.media_type(request)
    if media not in (shipped.PROTOBUF, "application/json", ""):
        raise UnsupportedMediaType(
            f"content type {excerpt(media)} is not application/json or {shipped.PROTOBUF}",
            "content-type",
        )
    try:
        async with shipped.received(request, runtime, caller, "loki") as body:
            if media == shipped.PROTOBUF:
                await body.unsnappy()
                streams = await body.decoded(loki.protobuf_steps, "streams", owner_labels)
            else:
                streams = await body.decoded(loki.json_steps, "streams", owner_labels)
            groups = [(label, number, messages) for number, (label, messages) in enumerate(streams)]
            outcome = await shipped.write(runtime, caller, "loki", groups, "streams", body.digest)
    except (BadRequest, Invalid) as exc:
        return PlainTextResponse(exc.message, status_code=400)
    if outcome.refused:
        return PlainTextResponse(ignored(outcome), status_code=400)
    return Response(status_code=204)


def ignored(outcome: shipped.Outcome, most: int = MAX_NAMED) -> str:
    """Loki's answer to a push it stored in part: the first ignored entries, one a line, and
    how many of the push's entries were ignored."""
    lines = [f"{error.message}," for error in outcome.refused[:most]]
    lines.append(f"total ignored: {len(outcome.refused)} out of {outcome.total}")
    return "\n".join(lines)
