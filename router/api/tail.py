"""Live tail: Server-Sent Events of the rows committed from now on (router/tail)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Header, Query

from router import clock
from router.api.deps import RuntimeDep
from router.api.responses import ERROR_DESCRIPTIONS, described
from router.api.search import (
    Address,
    EitherDirection,
    IpVersionParam,
    MatchParam,
    OwnerPrefix,
    Owners,
    Patterns,
    Ports,
    Proto,
    Switches,
    SwitchPrefix,
    audit_query,
    flow_query,
    named_keys,
)
from router.auth.dependency import AuditTail, FlowsTail
from router.auth.registry import Caller
from router.auth.scopes import Grant
from router.http.leased import LeasedResponse, error_event
from router.http.sse import MEDIA_TYPE, EventStreamResponse
from router.runtime import Runtime
from router.search import query as queries
from router.tail.position import MAX_CURSOR_CHARS
from router.tail.subscription import TailSpec

router = APIRouter(prefix="/v1", tags=["tail"])

Since = Annotated[
    str | None,
    Query(
        alias="from",
        description="RFC 3339: first the matching rows from this time on (as a search of them "
        "would find them), then the live rows, with no gap and no repeat between",
        json_schema_extra={"format": "date-time"},
    ),
]
After = Annotated[
    str | None,
    Query(
        max_length=MAX_CURSOR_CHARS,
        description="Resume after this event (an event's id); the Last-Event-ID header wins",
    ),
]
RowLimit = Annotated[
    int | None,
    Query(ge=1, description="End the stream after this many rows (replayed ones included)"),
]
Duration = Annotated[
    float | None,
    Query(gt=0, le=86400, description="End the stream after this many seconds"),
]
LastEventId = Annotated[
    str | None,
    Header(
        alias="Last-Event-ID",
        max_length=MAX_CURSOR_CHARS,
        description="Sent by EventSource clients when they reconnect",
    ),
]
TAIL_ERRORS: dict[int | str, dict[str, Any]] = described(
    {
        400: "A parameter is invalid, or the cursor is not this stream's or older than the "
        "shards' tail log (SHARDLOG_TAIL__LOG_KEEP_S); the error names it",
        401: ERROR_DESCRIPTIONS[401],
        403: "The token lacks the tail scope or the read scope, or a named owner or switch "
        "belongs to another tenant or lies outside the token's prefixes",
        422: "A parameter is missing or of the wrong type, or holds a NUL (the error names it)",
        429: "This router serves SHARDLOG_TAIL__MAX_SUBSCRIPTIONS streams, or the token is over "
        "its request rate; see Retry-After",
        503: "The metadata database is unavailable",
    }
)
STREAM: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-Sent Events: `subscribed` first, then one event per row (`data`: "
        "the row as a search item, with `late`, and for flows `merged`; `id`: the resume "
        "cursor), `partial` when a replay missed shards, `overflow` as the last event of a "
        "client that fell behind; a comment every SHARDLOG_TAIL__HEARTBEAT_S",
        # One event of the stream, as the SSE format defines its fields (OpenAPI 3.2 calls
        # this the item schema of text/event-stream).
        "content": {
            MEDIA_TYPE: {
                "schema": {
                    "type": "object",
                    "properties": {
                        "event": {"type": "string"},
                        "data": {"type": "string"},
                        "id": {"type": "string"},
                        "retry": {"type": "integer"},
                    },
                }
            }
        },
    }
}


def _window(runtime: Runtime, since: str | None) -> tuple[str, str, datetime | None]:
    """The window the filters are checked with: the replay's, from ``from`` to past anything
    a writer may send (SHARDLOG_INGEST__FUTURE_SKEW_S), or a nominal one."""
    now = clock.now()
    start = queries.parse_time(since, "from") if since is not None else now
    end = now + timedelta(seconds=runtime.settings.ingest.future_skew_s + 60)
    return start.isoformat(), end.isoformat(), start if since is not None else None


async def _open(
    runtime: Runtime,
    caller: Caller,
    spec: TailSpec,
    after: str | None,
    last_event_id: str | None,
    replay_from: datetime | None,
    limit: int | None,
    duration_s: float | None,
) -> LeasedResponse:
    # A reconnecting EventSource sends the header and its first URL (with after= or from=
    # still in it): the header wins, and an error names it.
    field = "Last-Event-ID" if last_event_id else "after"
    # Not cancelled while it subscribes (lease.bound would): a subscription is ended by its
    # stream's generator, which only a started stream runs.
    lease = runtime.auth.lease(caller)
    try:
        frames = await runtime.tail.open(
            spec, last_event_id or after, replay_from, limit, duration_s, field
        )
    except BaseException:
        lease.close()
        raise
    answer = EventStreamResponse(frames, runtime.settings.tail.stall_timeout_s)
    return LeasedResponse(answer, lease, error_event)


def _spec(kind: Any, query: queries.AuditQuery | queries.FlowQuery, grant: Grant) -> TailSpec:
    keys = query.owners if isinstance(query, queries.AuditQuery) else query.switches
    return TailSpec(kind, query, keys, grant)


@router.get(
    "/audit/tail",
    summary="Audit rows as they are committed (Server-Sent Events)",
    response_class=EventStreamResponse,
    responses={**STREAM, **TAIL_ERRORS},
)
async def tail_audit(
    caller: AuditTail,
    runtime: RuntimeDep,
    owner: Owners = [],  # noqa: B006
    owner_prefix: OwnerPrefix = None,
    q: Patterns = [],  # noqa: B006
    match: MatchParam = "substring",
    since: Since = None,
    after: After = None,
    limit: RowLimit = None,
    duration_s: Duration = None,
    last_event_id: LastEventId = None,
) -> LeasedResponse:
    owners = named_keys(runtime, owner, owner_prefix, "owner")
    start, end, replay_from = _window(runtime, since)
    query = audit_query(runtime, owners, start, end, q, match, "asc")
    spec = _spec("audit", query, caller.grant)
    return await _open(runtime, caller, spec, after, last_event_id, replay_from, limit, duration_s)


@router.get(
    "/flows/tail",
    summary="Flows as they are committed or merged into (Server-Sent Events)",
    response_class=EventStreamResponse,
    responses={**STREAM, **TAIL_ERRORS},
)
async def tail_flows(
    caller: FlowsTail,
    runtime: RuntimeDep,
    switch: Switches = [],  # noqa: B006
    switch_prefix: SwitchPrefix = None,
    src_ip: Address = None,
    dst_ip: Address = None,
    src_port: Ports = None,
    dst_port: Ports = None,
    ip_version: IpVersionParam = None,
    proto: Proto = None,
    either_direction: EitherDirection = False,
    since: Since = None,
    after: After = None,
    limit: RowLimit = None,
    duration_s: Duration = None,
    last_event_id: LastEventId = None,
) -> LeasedResponse:
    start, end, replay_from = _window(runtime, since)
    query = flow_query(
        runtime,
        named_keys(runtime, switch, switch_prefix, "switch"),
        start,
        end,
        src_ip,
        dst_ip,
        src_port,
        dst_port,
        ip_version,
        proto,
        either_direction,
        "asc",
    )
    spec = _spec("flow", query, caller.grant)
    return await _open(runtime, caller, spec, after, last_event_id, replay_from, limit, duration_s)
