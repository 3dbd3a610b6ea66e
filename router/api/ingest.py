"""The write API: POST /v1/audit, POST /v1/flows, DELETE /v1/flows."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Request

from router.api.deps import RuntimeDep
from router.api.responses import ERROR_DESCRIPTIONS, GUARDED, described, errors, record_body
from router.auth.dependency import AuditWrite, FlowsWrite
from router.auth.limits import TokenLimiter
from router.auth.registry import Caller
from router.errors import ShardlogError, TooLarge, excerpt
from router.ingest import body as bodies
from router.ingest.csv_flows import csv_flows
from router.ingest.idempotency import check_key, tenant_key
from router.ingest.service import Records
from router.ingest.service import Request as WriteRequest
from router.models.ingest import Accepted, AuditRecord, FlowDeleteIn, FlowRecord, Removed
from router.runtime import Runtime

router = APIRouter(prefix="/v1", tags=["ingest"])

NDJSON_TYPES = ("application/x-ndjson", "application/ndjson", "application/jsonl")
WRITE_ERRORS: dict[int | str, dict[str, Any]] = described(
    {
        400: "A body or NDJSON line that is not JSON",
        401: ERROR_DESCRIPTIONS[401],
        403: "The token lacks the write scope, or a record's key belongs to another tenant, "
        "lies outside the token's prefixes or is reserved for the platform, shardlog.* (the "
        "error names the record); nothing written, no key claimed",
        409: "An attempt with this Idempotency-Key is still running; see Retry-After",
        413: "Body or record count over the limit",
        415: "Unsupported content type",
        422: "A record or field is invalid (nothing written), or a bad Idempotency-Key",
        429: "Over the token's request or byte rate, or the router holds too many request "
        "bytes; see Retry-After",
        503: "A shard could not take its rows; see Retry-After",
    }
)
CSV_COLUMNS = (
    "Flow CSV, UTF-8, LF or CRLF: the five columns src_ip,dest_ip,src_port,dest_port,ip_type "
    "(ip_type IPv4 or IPv6), with or without a header row. A header may add ts, bytes, "
    "packets, proto, tcp_flags (0..255) and sampling_rate (1: unsampled; bytes and packets "
    "are taken as already scaled up by it), and may say dst_ip/dst_port. Every row's switch "
    "is the switch query parameter (required with CSV); errors name the physical line, "
    "lines[N]"
)


IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description="Retrying with the same key never stores or merges a row twice",
        # check_key's rule; HTTP takes the spaces around a header value for none of it.
        json_schema_extra={"pattern": "^[!-~](?:[ -~]{0,253}[!-~])?$"},
    ),
]


class UnsupportedMediaType(ShardlogError):
    status = 415
    code = "unsupported_media_type"


def open_body(
    request: Request,
    runtime: Runtime,
    caller: Caller,
    decode: Callable[[AsyncIterator[bytes]], AsyncIterator[bytes]] | None = None,
    hashed: bool = True,
) -> bodies.Body:
    """The request's body, its bytes charged to the token's byte rate as they arrive and, once
    ``decode``d (a Content-Encoding), counted against the body limit and the router's budget."""
    settings = runtime.settings.ingest
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > settings.max_body_bytes:
        raise TooLarge(f"request body is larger than {settings.max_body_bytes} bytes", "body")
    chunks: AsyncIterator[bytes] = request.stream()
    if caller.limiter is not None:
        chunks = _metered(chunks, caller.limiter)
    if decode is not None:
        chunks = decode(chunks)
    return bodies.Body(
        chunks, settings.max_body_bytes, runtime.ingest_budget, settings.retry_after_s, hashed
    )


async def _metered(chunks: AsyncIterator[bytes], limiter: TokenLimiter) -> AsyncIterator[bytes]:
    """Charge the body's bytes to the token's byte rate as they arrive: the debt a large body
    leaves makes the token's next writes wait (429) until it is paid."""
    async for chunk in chunks:
        limiter.charge_bytes(len(chunk))
        yield chunk


def _records(
    request: Request, body: bodies.Body, switch: str | None, allow_csv: bool, longest: int
) -> tuple[Records, str]:
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media in NDJSON_TYPES:
        return bodies.ndjson_blocks(body, longest), "records"
    if media in ("application/json", ""):
        return bodies.json_array(body, longest), "records"
    if media == "text/csv" and allow_csv:
        return csv_flows(body, switch, longest), "lines"
    accepted = ", ".join(("application/json", *NDJSON_TYPES[:1], *(["text/csv"] * allow_csv)))
    raise UnsupportedMediaType(
        f"content type {excerpt(media)} is not one of {accepted}", "content-type"
    )


async def _write(
    request: Request,
    runtime: Runtime,
    caller: Caller,
    key: str | None,
    switch: str | None,
    kind: Literal["audit", "flow"],
) -> dict[str, Any]:
    checked_key = None if key is None else tenant_key(caller.grant.tenant, check_key(key))
    # The digest tells a keyed retry from a different body under the same key.
    body = open_body(request, runtime, caller, hashed=checked_key is not None)
    try:
        longest = runtime.settings.ingest.max_record_bytes
        records, label = _records(request, body, switch, kind == "flow", longest)
        write = WriteRequest(records, label, checked_key, lambda: body.digest, caller.grant)
        runtime.metrics.ingest_inflight_bytes.set(runtime.ingest_budget.used)
        if kind == "audit":
            return await runtime.ingest.write_audit(write)
        return await runtime.ingest.write_flows(write)
    finally:
        body.release()
        runtime.metrics.ingest_inflight_bytes.set(runtime.ingest_budget.used)


@router.post(
    "/audit",
    summary="Write audit records (JSON array or NDJSON)",
    response_model=Accepted,
    responses=WRITE_ERRORS,
    openapi_extra=record_body(AuditRecord, NDJSON_TYPES),
)
async def write_audit(
    request: Request, caller: AuditWrite, runtime: RuntimeDep, key: IdempotencyKey = None
) -> dict[str, Any]:
    return await _write(request, runtime, caller, key, None, "audit")


@router.post(
    "/flows",
    summary="Write flows (JSON array, NDJSON or CSV)",
    response_model=Accepted,
    responses=WRITE_ERRORS,
    openapi_extra=record_body(FlowRecord, NDJSON_TYPES, csv=CSV_COLUMNS),
)
async def write_flows(
    request: Request,
    caller: FlowsWrite,
    runtime: RuntimeDep,
    key: IdempotencyKey = None,
    switch: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=256,
            description="The switch of CSV rows that have no switch column (or an empty one)",
        ),
    ] = None,
) -> dict[str, Any]:
    return await _write(request, runtime, caller, key, switch, "flow")


@router.delete(
    "/flows",
    summary="Remove flows: 5-tuples of one switch over a day range",
    response_model=Removed,
    responses=errors(400, 422, 503, *GUARDED),
)
async def delete_flows(
    body: FlowDeleteIn, caller: FlowsWrite, runtime: RuntimeDep
) -> dict[str, int]:
    removed = await runtime.flow_deletion.delete(body, caller.grant)
    await runtime.self_audit.record(
        caller.actor,
        "flows.delete",
        f"switch {body.switch}",
        days=f"{body.from_day.isoformat()}..{body.to_day.isoformat()}",
        flows=len(body.flows),
        removed=removed,
        token_id=caller.token_id,
    )
    return {"removed": removed}
