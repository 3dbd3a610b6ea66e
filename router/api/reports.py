"""Reports: roll-ups of audit rows or flows over a window, grouped and ordered by the caller's
choice, computed on the shards and merged here (router/reports). The search filters apply."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

import orjson
from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from router.api.deps import RuntimeDep
from router.api.leasing import opened
from router.api.responses import ERROR_DESCRIPTIONS, described, ref
from router.api.search import (
    Address,
    BackendParam,
    EitherDirection,
    From,
    IpVersionParam,
    MatchParam,
    OwnerPrefix,
    Partial,
    Patterns,
    Ports,
    Proto,
    SwitchPrefix,
    To,
    audit_query,
    flow_query,
    named_keys,
)
from router.auth.dependency import AuditReport, FlowsReport
from router.auth.registry import Caller
from router.csv_cells import csv_cell
from router.errors import ShardlogError
from router.http.leased import LeasedResponse, error_line
from router.models.errors import Error
from router.models.report import Report
from router.reports.service import Answer
from router.reports.spec import BUCKETS, Format, Kind, build_spec
from router.runtime import Runtime
from router.search import query as queries
from router.search.query import AuditQuery, FlowQuery

router = APIRouter(prefix="/v1", tags=["reports"])

REPORT_ERRORS: dict[int | str, dict[str, Any]] = described(
    {
        400: "A parameter is invalid: an unknown group_by or metric, a prefix length out of "
        "range, too many buckets, too many owners or switches named or covered by a prefix or "
        "no key at all (the error names the parameter)",
        401: ERROR_DESCRIPTIONS[401],
        403: "The token lacks `reports` or the read scope of the data, or a named owner or "
        "switch belongs to another tenant or lies outside the token's prefixes (or the prefix "
        "does)",
        422: "A parameter is missing or of the wrong type (the error names it)",
        429: ERROR_DESCRIPTIONS[429],
        503: "A shard failed and partial=false, or the fdw path failed",
        504: "A shard did not answer in time and partial=false",
    }
)
ANSWER: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The report: one JSON document (format=json); or its groups, one JSON "
        "object per line (ndjson) or a CSV table with a header line (csv), the header's "
        "partial and failed shards then in X-Shardlog-Partial and X-Shardlog-Failed-Shards",
        "content": {
            "application/json": {"schema": ref(Report)},
            "application/x-ndjson": {"schema": {"anyOf": [{"type": "object"}, ref(Error)]}},
            "text/csv": {"schema": {"type": "string"}},
        },
    }
}
GroupBy = Annotated[
    list[str],
    Query(
        description="Repeated or comma-separated: bucket, owner/switch, src_ip, dst_ip "
        "(or a prefix: src_ip/24, dst_ip/64), src_port, dst_port, proto, ip_version; none: one "
        "total row"
    ),
]
Metrics = Annotated[
    list[str],
    Query(
        description="Repeated or comma-separated: rows, flows, bytes, packets, "
        "distinct(src_ip), distinct(dst_ip), min(first_seen), max(last_seen); audit: rows, "
        "distinct(owner). Default rows"
    ),
]
Bucket = Annotated[
    Literal["1m", "5m", "15m", "1h", "1d"] | None,
    Query(description="Width of the time buckets of group_by=bucket, aligned to UTC midnight"),
]
OrderBy = Annotated[str | None, Query(description="A metric; none: groups in key order")]
Order = Annotated[Literal["asc", "desc"], Query(description="Direction of order_by")]
Limit = Annotated[int | None, Query(ge=1, description="The first (top) N groups")]
FormatParam = Annotated[Format, Query(description="json, ndjson or csv")]
Owners = Annotated[
    list[str],
    Query(
        description="An owner; repeat it for several (up to SHARDLOG_REPORT__MAX_KEYS). "
        "Neither owner nor owner_prefix: every owner the token reaches"
    ),
]
Switches = Annotated[
    list[str],
    Query(
        description="A switch; repeat it for several (up to SHARDLOG_REPORT__MAX_KEYS). "
        "Neither switch nor switch_prefix: every switch the token reaches"
    ),
]
assert set(BUCKETS) == {"1m", "5m", "15m", "1h", "1d"}


def _keys(runtime: Runtime, listed: list[str], prefix: str | None, field: str) -> queries.Keys:
    """Listed keys up to SHARDLOG_REPORT__MAX_KEYS; what a prefix or no key covers is bounded
    when the plan resolves it (SHARDLOG_REPORT__MAX_MATCHED_KEYS)."""
    limit = (runtime.settings.report.max_keys, "SHARDLOG_REPORT__MAX_KEYS")
    return named_keys(runtime, listed, prefix, field, limit)


async def _answer(
    runtime: Runtime,
    kind: Kind,
    filters: AuditQuery | FlowQuery,
    choice: dict[str, Any],
    partial: bool,
    backend: Any,
    caller: Caller,
) -> LeasedResponse:
    spec = build_spec(kind, filters, max_buckets=runtime.settings.report.max_buckets, **choice)
    report = runtime.reports.report(spec, partial, backend, grant=caller.grant)
    answer, lease = await opened(runtime, caller, report)
    headers = {
        "X-Shardlog-Partial": "true" if answer.failures else "false",
        "X-Shardlog-Failed-Shards": ",".join(f.shard for f in answer.failures),
    }
    if spec.format == "json":
        body = StreamingResponse(_json(answer), media_type="application/json", headers=headers)
        # The document is cut where it is: the error follows on a line of its own.
        return LeasedResponse(body, lease, lambda lapsed: b"\n" + error_line(lapsed))
    if spec.format == "ndjson":
        body = StreamingResponse(
            _ndjson(answer), media_type="application/x-ndjson", headers=headers
        )
    else:
        body = StreamingResponse(_csv(answer), media_type="text/csv", headers=headers)
    return LeasedResponse(body, lease, error_line)


# Groups are sent in chunks of about this size, not one per group: a report of small groups
# would otherwise be a TCP segment per group (30,000 for 3 MB), each carrying its own overhead.
_CHUNK_BYTES = 64 * 1024


async def _json(answer: Answer) -> AsyncIterator[bytes]:
    chunk = bytearray(orjson.dumps(answer.header())[:-1] + b',"groups":[')
    separator = b""
    async for row in answer.rows:
        chunk += separator + orjson.dumps(row)
        separator = b","
        if len(chunk) >= _CHUNK_BYTES:
            yield bytes(chunk)
            chunk.clear()
    yield bytes(chunk) + b'],"spilled_runs":' + str(answer.spilled[0]).encode() + b"}"


async def _ndjson(answer: Answer) -> AsyncIterator[bytes]:
    chunk = bytearray()
    try:
        async for row in answer.rows:
            chunk += orjson.dumps(row) + b"\n"
            if len(chunk) >= _CHUNK_BYTES:
                yield bytes(chunk)
                chunk.clear()
    except ShardlogError as exc:
        chunk += orjson.dumps(exc.body()) + b"\n"
    yield bytes(chunk)


async def _csv(answer: Answer) -> AsyncIterator[bytes]:
    columns = [k.name for k in answer.spec.group_by] + [m.name for m in answer.spec.metrics]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    async for row in answer.rows:
        writer.writerow([csv_cell(row[c]) for c in columns])
        if buffer.tell() >= _CHUNK_BYTES:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue().encode()


@router.get(
    "/audit/report",
    summary="Audit rows of owners in a window, grouped and counted",
    response_class=StreamingResponse,
    responses={**ANSWER, **REPORT_ERRORS},
)
async def report_audit(
    caller: AuditReport,
    runtime: RuntimeDep,
    start: From,
    to: To,
    owner: Owners = [],  # noqa: B006
    owner_prefix: OwnerPrefix = None,
    q: Patterns = [],  # noqa: B006
    match: MatchParam = "substring",
    group_by: GroupBy = [],  # noqa: B006
    metrics: Metrics = [],  # noqa: B006
    bucket: Bucket = None,
    order_by: OrderBy = None,
    order: Order = "desc",
    limit: Limit = None,
    format: FormatParam = "json",
    partial: Partial = True,
    backend: BackendParam = "fanout",
) -> LeasedResponse:
    keys = _keys(runtime, owner, owner_prefix, "owner")
    days = runtime.settings.report.max_range_days
    filters = audit_query(runtime, keys, start, to, q, match, "asc", max_days=days)
    choice = {
        "group_by": group_by,
        "metrics": metrics,
        "bucket": bucket,
        "order_by": order_by,
        "order": order,
        "limit": limit,
        "format": format,
    }
    return await _answer(runtime, "audit", filters, choice, partial, backend, caller)


@router.get(
    "/flows/report",
    summary="Flows of switches in a window, grouped and summed (top talkers, histograms)",
    response_class=StreamingResponse,
    responses={**ANSWER, **REPORT_ERRORS},
)
async def report_flows(
    caller: FlowsReport,
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
    either_direction: EitherDirection = False,
    group_by: GroupBy = [],  # noqa: B006
    metrics: Metrics = [],  # noqa: B006
    bucket: Bucket = None,
    order_by: OrderBy = None,
    order: Order = "desc",
    limit: Limit = None,
    format: FormatParam = "json",
    partial: Partial = True,
    backend: BackendParam = "fanout",
) -> LeasedResponse:
    keys = _keys(runtime, switch, switch_prefix, "switch")
    days = runtime.settings.report.max_range_days
    filter_args = (src_ip, dst_ip, src_port, dst_port, ip_version, proto, either_direction, "asc")
    filters = flow_query(runtime, keys, start, to, *filter_args, max_days=days)  # type: ignore[arg-type]
    choice = {
        "group_by": group_by,
        "metrics": metrics,
        "bucket": bucket,
        "order_by": order_by,
        "order": order,
        "limit": limit,
        "format": format,
    }
    return await _answer(runtime, "flow", filters, choice, partial, backend, caller)
