"""Row permalinks: one row of a search by the ``ref`` its item carries."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path

from router.api.deps import RuntimeDep
from router.api.responses import ERROR_DESCRIPTIONS, described
from router.auth.dependency import AuditRead, FlowsRead
from router.models.search import AuditItem, FlowItem

router = APIRouter(prefix="/v1", tags=["search"])

Ref = Annotated[str, Path(description="The `ref` of a search or export item")]
ROW_ERRORS = described(
    {
        400: "The ref is not one this service issued, or names the other kind of row (field: ref)",
        401: ERROR_DESCRIPTIONS[401],
        403: "The token lacks the read scope, or the row's owner or switch belongs to another "
        "tenant or lies outside the token's prefixes",
        404: "No such row: retention dropped its day, a deletion of flows removed it, or it "
        "never existed",
        422: "The ref holds a NUL character",
        429: "Over the token's request rate or concurrent searches; see Retry-After",
        503: "The row's shard or the metadata database is unavailable",
        504: "The row's shard did not answer in time",
    }
)


@router.get(
    "/audit/rows/{ref}",
    summary="One audit row by its ref",
    response_model=AuditItem,
    responses=ROW_ERRORS,
)
async def audit_row(caller: AuditRead, runtime: RuntimeDep, ref: Ref) -> dict[str, Any]:
    return await runtime.rows.fetch("audit", ref, caller.grant)


@router.get(
    "/flows/rows/{ref}",
    summary="One flow by its ref",
    response_model=FlowItem,
    responses=ROW_ERRORS,
)
async def flow_row(caller: FlowsRead, runtime: RuntimeDep, ref: Ref) -> dict[str, Any]:
    return await runtime.rows.fetch("flow", ref, caller.grant)
