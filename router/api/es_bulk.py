"""Elasticsearch's bulk API for log shippers (Beats, Logstash, Fluent Bit, Vector, rsyslog's
omelasticsearch, the Elasticsearch clients): POST /_bulk and POST /{index}/_bulk, and the
handshake they make first (GET / and HEAD /; rsyslog's GET /_cat/health). Nothing else of
Elasticsearch is pretended: its other paths are 404.

Each item is answered on its own, as Elasticsearch does: the good ones are written (one
write, acknowledged after commit) while the bad ones are refused in ``items``. Errors of the
whole request come in Elasticsearch's error form (``error_response``)."""

from __future__ import annotations

import functools
import hashlib
import socket
import time
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from router import clock
from router.api.deps import RuntimeDep
from router.api.ingest import open_body
from router.api.responses import REF, Responses, described, ref
from router.auth.dependency import AuditWrite
from router.auth.registry import Caller
from router.errors import ShardlogError, TooLarge
from router.ingest import body as bodies
from router.ingest.admit import admit
from router.models.es_bulk import BulkAction, BulkAnswer, EsError, EsInfo
from router.protocols import es_bulk, shipped
from router.protocols.encoding import decoded, decoder
from router.protocols.es_owner import OwnerRule, RuleError
from router.runtime import Runtime
from router.settings import EsBulkSettings, Settings

router = APIRouter(tags=["elasticsearch"])

PROTOCOL = "es_bulk"
LABEL = "items"
# The Elasticsearch clients 8.x refuse a 2xx answer without it.
PRODUCT = {"X-Elastic-Product": "Elasticsearch"}
ES_PATHS = ("/", "/_bulk", "/{index}/_bulk", "/_cat/health")
Ignored = Annotated[str | None, Query(description="Accepted and ignored")]


async def _ignored(
    refresh: Ignored = None,
    pipeline: Ignored = None,
    routing: Ignored = None,
    wait_for_active_shards: Ignored = None,
    timeout_: Annotated[
        str | None, Query(alias="timeout", description="Accepted and ignored")
    ] = None,
    filter_path: Annotated[
        str | None, Query(description="Ignored: the whole answer is sent")
    ] = None,
) -> None:
    """The bulk API's query parameters shippers send: each changes nothing for a log row
    (rows are searchable once acknowledged, whatever refresh says)."""


BulkParameters = Annotated[None, Depends(_ignored)]


def speaks_es(path: str) -> bool:
    """Whether errors on ``path`` are answered in Elasticsearch's form."""
    return path in ("/", "/_cat/health") or path.endswith("/_bulk")


def error_response(exc: ShardlogError) -> JSONResponse:
    status, body = es_bulk.request_error(exc)
    return JSONResponse(body, status_code=status, headers={**exc.headers(), **PRODUCT})


@functools.lru_cache(maxsize=4)
def owner_rule(text: str) -> OwnerRule:
    return OwnerRule(text)


def check_settings(settings: Settings) -> None:
    """A router whose owner rule does not parse refuses to start."""
    try:
        owner_rule(settings.es_bulk.owner_rule)
    except RuleError as exc:
        raise RuntimeError(f"SHARDLOG_ES_BULK__OWNER_RULE: {exc}") from None


def _es_errors(descriptions: dict[int, str]) -> Responses:
    errors = described(descriptions)
    for status, response in errors.items():
        if status != 500:
            response["model"] = EsError
    return errors


BULK_ERRORS = _es_errors(
    {
        400: "A line that is not an action where one is due, an action without its document "
        "line, an empty body, a body that is not valid gzip; nothing written",
        401: "No valid token (Bearer, Basic password or ApiKey)",
        403: "The token lacks audit:write, or an owner another tenant's write claimed "
        "between the items' check and their write (nothing written; sent again, only that "
        "owner's items are refused)",
        409: "This body was written before and an owner was remapped since: its rows would "
        "land elsewhere; send it changed (or wait out SHARDLOG_INGEST__IDEMPOTENCY_KEEP_HOURS)",
        413: "Body (decoded) over SHARDLOG_INGEST__MAX_BODY_BYTES, a line over "
        "SHARDLOG_INGEST__MAX_RECORD_BYTES, or more than SHARDLOG_INGEST__MAX_RECORDS actions",
        415: "A Content-Encoding other than gzip, deflate or identity",
        429: "Over the token's rates or the router's in-flight bytes, or the same body is "
        "being written; see Retry-After",
        503: "A shard could not take its rows; see Retry-After",
    }
)
HANDSHAKE_ERRORS = _es_errors(
    {
        401: BULK_ERRORS[401]["description"],
        403: "The token lacks audit:write",
        429: "Over the token's request rate; see Retry-After",
    }
)
BULK_BODY = {
    "requestBody": {
        "required": True,
        "description": "NDJSON: an action line (index or create), then the document's line: "
        "@timestamp (ISO 8601 or epoch millis; default now) is the ts, message the content "
        "(without one, the document's JSON is), the rest the attrs. Content-Encoding gzip "
        "is read",
        "content": {
            media: {"schema": {"anyOf": [{"$ref": REF + BulkAction.__name__}, {"type": "object"}]}}
            for media in ("application/x-ndjson", "application/json")
        },
    }
}


async def _bulk(
    request: Request, runtime: Runtime, caller: Caller, path_index: str | None
) -> Response:
    started = time.monotonic()
    settings = runtime.settings
    wbits = decoder(request.headers.get("content-encoding"))
    body = open_body(request, runtime, caller, lambda chunks: decoded(chunks, wbits))
    now = clock.now()
    bulk = es_bulk.Bulk(
        path_index, owner_rule(settings.es_bulk.owner_rule), now, settings.ingest.max_records
    )
    try:
        runtime.metrics.ingest_inflight_bytes.set(runtime.ingest_budget.used)
        try:
            await _read(bulk, body, settings.ingest.max_record_bytes)
        except es_bulk.BulkError as exc:
            body_ = es_bulk.error_body(exc.status, exc.kind, exc.reason)
            return JSONResponse(body_, status_code=exc.status, headers=PRODUCT)
        finally:
            runtime.metrics.protocol_bytes.labels(PROTOCOL).inc(body.size)
        items = bulk.items
        checked = shipped.check(
            bulk.messages, LABEL, runtime.ingest.request_limits(), now, bulk.positions
        )
        admitted = await admit(runtime.ingest, caller.grant, checked.rows, LABEL)
        for position, refusal in (*checked.refused, *admitted.refused):
            items[position].fail(*es_bulk.item_error(refusal), refusal.message)
        digest = hashlib.sha256(f"{path_index}\n{body.digest}".encode()).hexdigest()
        key = shipped.body_key(PROTOCOL, caller.grant, digest)
        written = await shipped.write(
            runtime.ingest,
            admitted.rows,
            caller.grant,
            LABEL,
            key if settings.es_bulk.idempotent else None,
            digest,
        )
    finally:
        body.release()
        runtime.metrics.ingest_inflight_bytes.set(runtime.ingest_budget.used)
    messages = runtime.metrics.protocol_messages
    messages.labels(PROTOCOL, "accepted").inc(written)
    messages.labels(PROTOCOL, "rejected").inc(len(items) - len(admitted.rows))
    took = int((time.monotonic() - started) * 1000)
    answer = es_bulk.answer(items, took, digest[:12])
    return Response(answer, media_type="application/json", headers=PRODUCT)


async def _read(bulk: es_bulk.Bulk, body: bodies.Body, max_line_bytes: int) -> None:
    try:
        async for lines in bodies.lines(body, max_line_bytes):
            bulk.feed(lines)
    except bodies.LineTooLong:
        raise TooLarge(
            f"a line after line [{bulk.line}] is longer than {max_line_bytes} bytes", "body"
        ) from None
    bulk.finish()


BULK_ROUTE: dict[str, Any] = {
    "responses": {200: {"model": BulkAnswer, "description": "Every item's outcome"}, **BULK_ERRORS},
    "openapi_extra": BULK_BODY,
}


# PUT as well: the Python client sends its bulk requests with it.
@router.put("/_bulk", summary="Elasticsearch bulk API (as POST)", **BULK_ROUTE)
@router.post(
    "/_bulk",
    summary="Elasticsearch bulk API: write log documents (index and create actions)",
    **BULK_ROUTE,
)
async def bulk(
    request: Request,
    caller: AuditWrite,
    runtime: RuntimeDep,
    _parameters: BulkParameters,
) -> Response:
    return await _bulk(request, runtime, caller, None)


@router.put(
    "/{index}/_bulk", summary="Elasticsearch bulk API with a default index (as POST)", **BULK_ROUTE
)
@router.post("/{index}/_bulk", summary="Elasticsearch bulk API with a default index", **BULK_ROUTE)
async def bulk_into(
    request: Request,
    caller: AuditWrite,
    runtime: RuntimeDep,
    index: Annotated[str, Path(description="The index of actions that name none")],
    _parameters: BulkParameters,
) -> Response:
    return await _bulk(request, runtime, caller, index)


def _greeting(settings: EsBulkSettings) -> dict[str, Any]:
    cluster_uuid = uuid.uuid5(uuid.NAMESPACE_URL, f"shardlog:{settings.cluster_name}")
    return es_bulk.greeting(
        socket.gethostname(), settings.cluster_name, str(cluster_uuid), settings.version
    )


@router.get(
    "/",
    summary="Elasticsearch handshake: the node's name and version (8.x)",
    responses={
        200: {"model": EsInfo, "description": "As Elasticsearch 8 answers"},
        **HANDSHAKE_ERRORS,
    },
)
async def info(caller: AuditWrite, runtime: RuntimeDep) -> Response:
    return JSONResponse(_greeting(runtime.settings.es_bulk), headers=PRODUCT)


@router.head(
    "/",
    summary="Elasticsearch handshake: is it there",
    responses={200: {"description": "Yes"}, **HANDSHAKE_ERRORS},
    response_class=Response,
)
async def ping(caller: AuditWrite) -> Response:
    return Response(headers=PRODUCT)


@router.get(
    "/_cat/health",
    summary="Elasticsearch's cluster health line, which rsyslog asks before it resumes",
    responses={
        200: {
            "description": "One line; green means the router takes bulk requests (a shard "
            "that cannot take rows answers its 503 to the bulk request itself)",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        **{
            status: {
                "description": answer["description"],
                "content": {"application/json": {"schema": ref(answer["model"])}},
            }
            for status, answer in HANDSHAKE_ERRORS.items()
        },
    },
    response_class=PlainTextResponse,
)
async def cat_health(caller: AuditWrite, runtime: RuntimeDep) -> Response:
    now = clock.time()
    name = runtime.settings.es_bulk.cluster_name
    hms = time.strftime("%H:%M:%S", time.gmtime(now))
    line = f"{int(now)} {hms} {name} green 1 1 0 0 0 0 0 0 - 100.0%\n"
    return Response(line, media_type="text/plain", headers=PRODUCT)
