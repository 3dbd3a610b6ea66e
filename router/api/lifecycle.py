"""Admin API of day tables and retention: the table catalog, policies, runs and history."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query

from router import clock
from router.api.admin import owner_json
from router.api.deps import RuntimeDep, admin_router
from router.api.responses import errors
from router.auth.dependency import Admin
from router.auth.self_audit import record_run
from router.catalog import store
from router.catalog.snapshot import OwnerKind
from router.compaction.runner import (
    KINDS,
    Compactor,
    Position,
    Scope,
    owner_keys,
    report_json,
)
from router.compaction.shared import survey_shared_days
from router.errors import BadRequest, NotFound
from router.models.admin import (
    CompactionState,
    Owner,
    OwnerPromoteIn,
    Policy,
    PolicyIn,
    RetentionReport,
    RetentionRun,
    RetentionRunDetail,
    RetentionRunIn,
    Sharing,
    Tables,
)
from router.models.common import Day
from router.retention import history, inventory, policies
from router.retention.runner import RunOptions
from router.sharing.status import sharing_status

router = admin_router()
# Ids are bigint in the metadata database: larger numbers are invalid, not a driver error.
RowId = Annotated[int, Path(ge=1, le=2**63 - 1)]


@router.get(
    "/tables",
    summary="Day tables by owner, day and shard, with rows and size",
    response_model=Tables,
    responses=errors(503),
)
async def list_tables(
    runtime: RuntimeDep,
    kind: OwnerKind | None = None,
    owner: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
    start: Annotated[Day | None, Query(alias="from", description="First day")] = None,
    to: Annotated[Day | None, Query(description="Last day, inclusive")] = None,
    shard: str | None = None,
    exact: Annotated[bool, Query(description="Count rows (scans) instead of estimating")] = False,
) -> dict[str, Any]:
    owner_ids = None
    if owner is not None:
        kinds = [kind] if kind else ["audit", "flow"]
        mappings = [await runtime.owners.lookup(k, owner) for k in kinds]  # type: ignore[arg-type]
        owner_ids = frozenset(m.id for m in mappings if m is not None)
    wanted = inventory.Filter(kind=kind, owner_ids=owner_ids, first=start, last=to, shard=shard)
    found = await inventory.take(
        runtime.metadata, runtime.pools, runtime.catalog.snapshot, wanted, exact
    )
    return {
        "tables": [t.to_json() for t in found.tables],
        "unreachable": found.unreachable,
    }


# A page's next_after (runner.Position.text): day/kind/owner id/shard.
AFTER_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}/(audit|flow)/[0-9]{1,19}/[a-z][a-z0-9_-]{0,62}$"


@router.get(
    "/compaction",
    summary="Compaction of closed audit and flow days: the state of each owner-day",
    response_model=CompactionState,
    responses=errors(400, 503),
)
async def compaction_state(
    runtime: RuntimeDep,
    day: Annotated[Day | None, Query(description="Only this UTC day")] = None,
    kind: Annotated[OwnerKind | None, Query(description="Only days of this kind")] = None,
    owner: Annotated[
        str | None,
        Query(min_length=1, max_length=256, description="Only this audit owner or switch"),
    ] = None,
    failed: Annotated[
        bool, Query(description="Only the owner-days whose last step failed")
    ] = False,
    limit: Annotated[int, Query(ge=1, le=10_000, description="Owner-days per page")] = 1000,
    after: Annotated[
        str | None,
        Query(pattern=AFTER_PATTERN, description="A page's next_after: the next page"),
    ] = None,
) -> dict[str, Any]:
    kinds = KINDS if kind is None else frozenset([kind])
    owner_ids = None
    if owner is not None:
        found = [await runtime.owners.lookup(k, owner) for k in sorted(kinds)]
        owner_ids = frozenset(mapping.id for mapping in found if mapping is not None)
    try:
        position = None if after is None else Position.parse(after)
    except ValueError:
        raise BadRequest("not a next_after of this endpoint", "after") from None
    scope = Scope(day, owner_ids, kinds, failed_only=failed, after=position, limit=limit)
    compactor = Compactor(runtime.metadata, runtime.pools, runtime.settings.compaction)
    report = await compactor.survey(runtime.catalog.snapshot, scope)
    answer = report_json(report, await owner_keys(runtime.metadata, report))
    answer["shard_days"] = []
    if owner is None and "audit" in kinds and after is None:
        shared = await survey_shared_days(
            runtime.metadata, runtime.pools, runtime.settings.compaction, day, failed
        )
        answer["shard_days"] = [d.to_json() for d in shared.days]
        answer["unreachable"] = {**shared.unreachable, **answer["unreachable"]}
    return answer


@router.get(
    "/sharing",
    summary="Shared tables of small owners on each shard for a day: owner-days, rows, bytes",
    response_model=Sharing,
    responses=errors(503),
)
async def sharing(
    runtime: RuntimeDep,
    day: Annotated[Day | None, Query(description="The UTC day (default today)")] = None,
) -> dict[str, Any]:
    return await sharing_status(runtime.pools, runtime.catalog.snapshot, day or clock.today())


@router.post(
    "/owners/promote",
    summary="An audit owner's new days to tables of its own; its shared days of today and "
    "yesterday moved by the next promotion run",
    response_model=Owner,
    responses=errors(400, 404),
)
async def promote_owner(body: OwnerPromoteIn, caller: Admin, runtime: RuntimeDep) -> dict[str, Any]:
    mapping = await store.set_own_tables(runtime.metadata, body.kind, body.key)
    if mapping is None:
        raise NotFound("audit owner is not mapped to a group yet", "key")
    await runtime.self_audit.record(
        caller.actor, "owner.promote", f"audit {mapping.key}", token_id=caller.token_id
    )
    return owner_json(mapping)


@router.get("/retention/policies", summary="Retention policies", response_model=list[Policy])
async def list_policies(runtime: RuntimeDep) -> list[dict[str, Any]]:
    return [policies.policy_json(p) for p in runtime.catalog.snapshot.retention]


@router.put(
    "/retention/policies",
    summary="Set the policy of a kind and group, or one owner",
    response_model=Policy,
    responses=errors(400, 404),
)
async def set_policy(body: PolicyIn, caller: Admin, runtime: RuntimeDep) -> dict[str, Any]:
    policy = await policies.set_policy(
        runtime.metadata, body.kind, body.group, body.owner, body.keep_days, body.archive
    )
    await runtime.catalog.reload()
    shown = policies.policy_json(policy)
    await runtime.self_audit.record(
        caller.actor, "policy.set", f"policy {policy.id}", **shown, token_id=caller.token_id
    )
    return shown


@router.delete(
    "/retention/policies/{policy_id}",
    status_code=204,
    summary="Remove a policy",
    responses=errors(404),
)
async def remove_policy(policy_id: RowId, caller: Admin, runtime: RuntimeDep) -> None:
    await policies.remove_policy(runtime.metadata, policy_id)
    await runtime.catalog.reload()
    await runtime.self_audit.record(
        caller.actor, "policy.remove", f"policy {policy_id}", token_id=caller.token_id
    )


@router.post(
    "/retention/run",
    summary="Run retention now (or preview it with dry_run)",
    response_model=RetentionReport,
    responses=errors(400),
)
async def run_retention(body: RetentionRunIn, caller: Admin, runtime: RuntimeDep) -> dict[str, Any]:
    await runtime.catalog.reload()
    report = await runtime.retention.run(
        runtime.catalog.snapshot,
        RunOptions(
            trigger="router",
            as_of=body.as_of,
            dry_run=body.dry_run,
            force=body.force,
            lock_wait_s=runtime.settings.retention.lock_wait_s,
        ),
    )
    if not body.dry_run:
        await record_run(runtime.self_audit, caller.actor, report, caller.token_id)
    return report.to_json()


@router.get(
    "/retention/runs",
    summary="Recent retention runs, newest first",
    response_model=list[RetentionRun],
)
async def list_runs(
    runtime: RuntimeDep, limit: Annotated[int, Query(ge=1, le=1000)] = 20
) -> list[dict[str, Any]]:
    return await history.runs(runtime.metadata, limit)


@router.get(
    "/retention/runs/{run_id}",
    summary="One run with every table it dropped",
    response_model=RetentionRunDetail,
    responses=errors(404),
)
async def get_run(run_id: RowId, runtime: RuntimeDep) -> dict[str, Any]:
    found = await history.run(runtime.metadata, run_id)
    if found is None:
        raise NotFound(f"retention run {run_id} does not exist", "run_id")
    return found
