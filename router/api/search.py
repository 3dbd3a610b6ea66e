"""The read API: searches that page by cursor, and NDJSON exports of every match."""

from __future__ import annotations

from enum import IntEnum
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel

from router.api.deps import RuntimeDep
from router.api.leasing import opened
from router.api.query_model import documented, query_model
from router.api.responses import ERROR_DESCRIPTIONS, Responses, described, ndjson_answer
from router.auth.dependency import AuditRead, FlowsRead
from router.auth.registry import Caller
from router.auth.scopes import Grant
from router.catalog.rules import owner_key_problem
from router.db.names import Kind
from router.errors import BadRequest, ShardlogError
from router.http.leased import LeasedResponse, error_line
from router.models.search import AuditItem, AuditPage, FlowItem, FlowPage
from router.runtime import Runtime
from router.search import page
from router.search import query as queries
from router.search.cursor import MAX_CURSOR_CHARS
from router.search.export import ExportFormat
from router.search.service import Backend, CountMode

router = APIRouter(prefix="/v1", tags=["search"])

Owners = Annotated[
    list[str],
    Query(
        description="An owner; repeat it for several (up to SHARDLOG_SEARCH__MAX_OWNERS). "
        "Neither owner nor owner_prefix: every owner the token reaches"
    ),
]
OwnerPrefix = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=256,
        description="Also every owner whose key starts with this text (literally: no wildcards)",
    ),
]
Switches = Annotated[
    list[str],
    Query(
        description="A switch; repeat it for several (up to SHARDLOG_SEARCH__MAX_OWNERS). "
        "Neither switch nor switch_prefix: every switch the token reaches"
    ),
]
SwitchPrefix = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=256,
        description="Also every switch whose key starts with this text (literally: no wildcards)",
    ),
]
RFC3339 = {"format": "date-time"}
From = Annotated[
    str, Query(alias="from", description="RFC 3339, inclusive", json_schema_extra=RFC3339)
]
To = Annotated[str, Query(description="RFC 3339, exclusive", json_schema_extra=RFC3339)]
Order = Annotated[
    Literal["asc", "desc"], Query(description="By time, then shard, then owner or switch, then id")
]
Limit = Annotated[int | None, Query(ge=1, description="Rows per page")]
CursorText = Annotated[
    str | None, Query(max_length=MAX_CURSOR_CHARS, description="From a previous page")
]
Consistent = Annotated[
    bool,
    Query(
        description="true: every page as of the first (rows added later never appear, each "
        "row there appears once); false: live, rows added while paging may appear in later "
        "pages. Not with backend=fdw"
    ),
]
Count = Annotated[CountMode, Query(description="none, estimate (planner) or exact")]
BackendParam = Annotated[
    Backend,
    Query(
        description="fanout: the router queries the shards; fdw: one query through the "
        "postgres_fdw parent table on the coordinator"
    ),
]
Partial = Annotated[
    bool,
    Query(
        description="true: answer with the shards that did answer (partial: true); false: 503/504"
    ),
]


class IpVersion(IntEnum):
    """An enum, not Literal[4, 6]: a query string is text, and "4" is not the literal 4."""

    v4 = 4
    v6 = 6


IpVersionParam = Annotated[IpVersion | None, Query(description="4 or 6")]
# The filters every read of the data takes alike (search, export, report, tail).
Patterns = Annotated[list[str], Query(description="Patterns, all must match")]
MatchParam = Annotated[queries.Match, Query()]
Address = Annotated[str | None, Query(description="Address or CIDR prefix")]
Ports = Annotated[str | None, Query(description="Port or range 1000-2000")]
Proto = Annotated[int | None, Query(ge=0, le=255)]
EitherDirection = Annotated[bool, Query(description="Also match dst->src")]


class PageQuery(BaseModel):
    """What every search page takes: its window, and how the page is made (the parameters
    are read in one pass: router/api/query_model.py)."""

    start: From
    to: To
    order: Order = "asc"
    limit: Limit = None
    cursor: CursorText = None
    count: Count = "none"
    partial: Partial = True
    backend: BackendParam = "fanout"
    consistent: Consistent = False


class AuditPageQuery(PageQuery):
    """The parameters of GET /v1/audit/search."""

    owner: Owners = []
    owner_prefix: OwnerPrefix = None
    q: Patterns = []
    match: MatchParam = "substring"


class FlowPageQuery(PageQuery):
    """The parameters of GET /v1/flows/search."""

    switch: Switches = []
    switch_prefix: SwitchPrefix = None
    src_ip: Address = None
    dst_ip: Address = None
    src_port: Ports = None
    dst_port: Ports = None
    ip_version: IpVersionParam = None
    proto: Proto = None
    either_direction: EitherDirection = False


AuditPageParams = Annotated[AuditPageQuery, Depends(query_model(AuditPageQuery))]
FlowPageParams = Annotated[FlowPageQuery, Depends(query_model(FlowPageQuery))]
SEARCH_ERRORS: dict[int | str, dict[str, Any]] = described(
    {
        400: "A parameter is invalid, or a prefix or no key at all covers too many owners or "
        "switches (the error names the parameter), or the cursor expired",
        401: ERROR_DESCRIPTIONS[401],
        403: "The token lacks the read scope, or a named owner or switch belongs to another "
        "tenant or lies outside the token's prefixes (or the prefix does)",
        429: "Over the token's request rate or concurrent searches; see Retry-After",
        422: "A parameter is missing or of the wrong type, or holds a NUL (the error names it)",
        503: "A shard failed and partial=false, or the metadata database is unavailable, or "
        "(consistent=true) the shards' snapshots do not fit in a cursor: retry",
        504: "A shard did not answer in time and partial=false",
    }
)


def _export_answer(line: type[BaseModel]) -> Responses:
    """format=ndjson: one item per line; format=csv: a table with a header line."""
    answer = ndjson_answer(line, "Every match: one item per line, or with format=csv a table")
    answer[200]["content"]["text/csv"] = {"schema": {"type": "string"}}
    return answer


def _limit(runtime: Runtime, limit: int | None) -> int:
    settings = runtime.settings.search
    value = limit or settings.default_limit
    if value > settings.max_limit:
        raise BadRequest(f"limit is at most {settings.max_limit}", "limit")
    return value


def check_search_key(value: str, field: str) -> str:
    problem = owner_key_problem(value)
    if problem is not None:
        raise BadRequest(f"{field} {problem}", field)
    return value


def named_keys(
    runtime: Runtime,
    listed: list[str],
    prefix: str | None,
    field: str,
    limit: tuple[int, str] | None = None,
) -> queries.Keys:
    """The ``field`` values of a search and its ``<field>_prefix``. ``limit``: how many values
    may be listed, and the setting that says so (default SHARDLOG_SEARCH__MAX_OWNERS)."""
    most, setting = limit or (runtime.settings.search.max_owners, "SHARDLOG_SEARCH__MAX_OWNERS")
    if len(listed) > most:
        raise BadRequest(f"at most {most} {field} values ({setting})", field)
    return queries.Keys.of(listed, prefix)


def _checked(keys: queries.Keys, field: str) -> queries.Keys:
    for key in keys.listed:
        check_search_key(key, field)
    if keys.prefix is not None:
        check_search_key(keys.prefix, f"{field}_prefix")
    return keys


def audit_query(
    runtime: Runtime,
    owners: queries.Keys,
    start: str,
    end: str,
    q: list[str],
    match: queries.Match,
    order: queries.Order,
    max_days: int | None = None,
) -> queries.AuditQuery:
    settings = runtime.settings.search
    return queries.AuditQuery(
        owners=_checked(owners, "owner"),
        window=queries.window(start, end, max_days or settings.max_range_days),
        patterns=queries.check_patterns(q, settings.max_patterns, settings.max_pattern_chars),
        match=match,
        order=order,
    )


def flow_query(
    runtime: Runtime,
    switches: queries.Keys,
    start: str,
    end: str,
    src_ip: str | None,
    dst_ip: str | None,
    src_port: str | None,
    dst_port: str | None,
    ip_version: IpVersion | None,
    proto: int | None,
    either_direction: bool,
    order: queries.Order,
    max_days: int | None = None,
) -> queries.FlowQuery:
    query = queries.FlowQuery(
        switches=_checked(switches, "switch"),
        window=queries.window(start, end, max_days or runtime.settings.search.max_range_days),
        src_ip=queries.IpFilter.parse(src_ip, "src_ip") if src_ip else None,
        dst_ip=queries.IpFilter.parse(dst_ip, "dst_ip") if dst_ip else None,
        src_port=queries.PortFilter.parse(src_port, "src_port") if src_port else None,
        dst_port=queries.PortFilter.parse(dst_port, "dst_port") if dst_port else None,
        ip_version=None if ip_version is None else int(ip_version),
        proto=proto,
        either_direction=either_direction,
        order=order,
    )
    queries.check_ip_versions(query)
    return query


async def _page(
    runtime: Runtime,
    grant: Grant,
    query: queries.AuditQuery | queries.FlowQuery,
    params: PageQuery,
) -> Response:
    """The page as its answer model (AuditPage, FlowPage) writes it, by router/search/page.py:
    the model stays the documented schema; a page of thousands of rows would cost more to
    validate and write through it than to find."""
    found = await runtime.search.search(
        query,
        _limit(runtime, params.limit),
        params.cursor,
        params.count,
        params.partial,
        params.backend,
        grant=grant,
        consistent=params.consistent,
    )
    kind: Kind = "audit" if isinstance(query, queries.AuditQuery) else "flow"
    return Response(await page.encode(kind, found), media_type="application/json")


@router.get(
    "/audit/search",
    summary="Audit rows of owners in a time range, by pattern",
    response_model=AuditPage,
    responses=SEARCH_ERRORS,
    openapi_extra=documented(AuditPageQuery),
)
async def search_audit(
    caller: AuditRead,
    runtime: RuntimeDep,
    params: AuditPageParams,
) -> Response:
    owners = named_keys(runtime, params.owner, params.owner_prefix, "owner")
    query = audit_query(
        runtime, owners, params.start, params.to, params.q, params.match, params.order
    )
    return await _page(runtime, caller.grant, query, params)


@router.get(
    "/flows/search",
    summary="Flows of switches by any part of the 5-tuple",
    response_model=FlowPage,
    responses=SEARCH_ERRORS,
    openapi_extra=documented(FlowPageQuery),
)
async def search_flows(
    caller: FlowsRead,
    runtime: RuntimeDep,
    params: FlowPageParams,
) -> Response:
    query = flow_query(
        runtime,
        named_keys(runtime, params.switch, params.switch_prefix, "switch"),
        params.start,
        params.to,
        params.src_ip,
        params.dst_ip,
        params.src_port,
        params.dst_port,
        params.ip_version,
        params.proto,
        params.either_direction,
        params.order,
    )
    return await _page(runtime, caller.grant, query, params)


@router.get(
    "/audit/export",
    summary="Every matching audit row as NDJSON or CSV",
    response_class=StreamingResponse,
    responses={**_export_answer(AuditItem), **SEARCH_ERRORS},
)
async def export_audit(
    caller: AuditRead,
    runtime: RuntimeDep,
    start: From,
    to: To,
    owner: Owners = [],  # noqa: B006
    owner_prefix: OwnerPrefix = None,
    q: Patterns = [],  # noqa: B006
    match: MatchParam = "substring",
    order: Order = "asc",
    format: ExportFormatParam = "ndjson",
) -> LeasedResponse:
    owners = named_keys(runtime, owner, owner_prefix, "owner")
    query = audit_query(runtime, owners, start, to, q, match, order)
    return await _stream(runtime, query, format, caller)


@router.get(
    "/flows/export",
    summary="Every matching flow as NDJSON or CSV",
    response_class=StreamingResponse,
    responses={**_export_answer(FlowItem), **SEARCH_ERRORS},
)
async def export_flows(
    caller: FlowsRead,
    runtime: RuntimeDep,
    start: From,
    to: To,
    switch: Switches = [],  # noqa: B006
    switch_prefix: SwitchPrefix = None,
    src_ip: Address = None,
    dst_ip: Address = None,
    src_port: Ports = None,
    dst_port: Ports = None,
    ip_version: IpVersionParam = None,
    proto: Proto = None,
    either_direction: bool = False,
    order: Order = "asc",
    format: ExportFormatParam = "ndjson",
) -> LeasedResponse:
    query = flow_query(
        runtime,
        named_keys(runtime, switch, switch_prefix, "switch"),
        start,
        to,
        src_ip,
        dst_ip,
        src_port,
        dst_port,
        ip_version,
        proto,
        either_direction,
        order,
    )
    return await _stream(runtime, query, format, caller)


ExportFormatParam = Annotated[
    ExportFormat,
    Query(description="ndjson: one item per line; csv: a header line, then a row per match"),
]
_MEDIA_TYPES = {"ndjson": "application/x-ndjson", "csv": "text/csv; charset=utf-8"}


async def _stream(
    runtime: Runtime,
    query: queries.AuditQuery | queries.FlowQuery,
    format: ExportFormat,
    caller: Caller,
) -> LeasedResponse:
    # The shards' cursors are open and their first rows read before the answer begins, so a
    # failing shard or a bad pattern is still a clean 4xx/5xx.
    chunks, lease = await opened(
        runtime, caller, runtime.search.export(query, format, caller.grant)
    )

    async def body() -> Any:
        try:
            async for chunk in chunks:
                yield chunk
        except ShardlogError as exc:
            # The status line is long gone: the stream ends with the error as its last line.
            yield orjson.dumps(exc.body()) + b"\n"

    return LeasedResponse(
        StreamingResponse(body(), media_type=_MEDIA_TYPES[format]), lease, error_line
    )
