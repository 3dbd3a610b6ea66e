"""Admin API: read and change the catalog. Changes go through catalog.store and reach every
router through the catalog version NOTIFY."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query

from router.api.deps import RuntimeDep, admin_router
from router.api.responses import errors
from router.auth.dependency import Admin
from router.catalog import mirror, rules, store
from router.catalog import shards as shard_admin
from router.catalog.snapshot import OwnerKind, OwnerMapping, shard_json
from router.errors import NotFound
from router.models.admin import (
    Catalog,
    Group,
    GroupIn,
    GroupReplication,
    GroupReplicationIn,
    Owner,
    OwnerMapIn,
    Shard,
    ShardIn,
    ShardStateIn,
)

# Names of groups and shards in paths follow the catalog's rule: one that does not is invalid
# (422) before it reaches the database.
Name = Annotated[
    str,
    Path(
        pattern=rules.NAME_PATTERN.pattern,
        description="1-63 characters: lowercase letters, digits, '_' or '-', starting with "
        "a letter",
    ),
]
router = admin_router()


def owner_json(mapping: OwnerMapping) -> dict[str, Any]:
    return {
        "kind": mapping.kind,
        "key": mapping.key,
        "id": mapping.id,
        "group": mapping.group,
        "assigned_by": mapping.assigned_by,
        "tenant": mapping.tenant,
        "own_tables": mapping.own_tables,
    }


@router.get("/catalog", summary="The catalog this router serves", response_model=Catalog)
async def catalog(runtime: RuntimeDep) -> dict[str, Any]:
    return runtime.catalog.snapshot.to_json()


@router.get("/groups", summary="Shard groups", response_model=list[Group])
async def list_groups(runtime: RuntimeDep) -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = runtime.catalog.snapshot.to_json()["groups"]
    return groups


@router.post(
    "/groups",
    status_code=201,
    summary="Add a shard group",
    response_model=Group,
    responses=errors(400, 409),
)
async def add_group(body: GroupIn, caller: Admin, runtime: RuntimeDep) -> dict[str, Any]:
    group = await store.add_group(runtime.metadata, body.name, body.placement, body.synchronous)
    await runtime.catalog.reload()
    await runtime.self_audit.record(
        caller.actor,
        "group.add",
        group.name,
        placement=group.placement,
        synchronous=group.synchronous,
        token_id=caller.token_id,
    )
    return {
        "name": group.name,
        "placement": group.placement,
        "synchronous": group.synchronous,
        "shards": [],
    }


@router.delete(
    "/groups/{name}",
    status_code=204,
    summary="Remove an empty shard group (no shards, no owners)",
    responses=errors(404, 409),
)
async def remove_group(name: Name, caller: Admin, runtime: RuntimeDep) -> None:
    policies = await store.remove_group(runtime.metadata, name)
    await runtime.catalog.reload()
    await runtime.self_audit.record(
        caller.actor, "group.remove", name, retention_policies=policies, token_id=caller.token_id
    )


@router.put(
    "/groups/{name}/replication",
    summary="Synchronous replication of a group's writes",
    response_model=GroupReplication,
    responses=errors(400, 404),
)
async def set_group_replication(
    name: Name, body: GroupReplicationIn, caller: Admin, runtime: RuntimeDep
) -> dict[str, Any]:
    group = await store.set_group_replication(runtime.metadata, name, body.synchronous)
    await runtime.catalog.reload()
    await runtime.self_audit.record(
        caller.actor,
        "group.replication",
        group.name,
        synchronous=group.synchronous,
        token_id=caller.token_id,
    )
    return {"name": group.name, "placement": group.placement, "synchronous": group.synchronous}


@router.get("/shards", summary="Shards with their group and state", response_model=list[Shard])
async def list_shards(runtime: RuntimeDep) -> list[dict[str, Any]]:
    shards: list[dict[str, Any]] = runtime.catalog.snapshot.to_json()["shards"]
    return shards


@router.post(
    "/shards",
    status_code=201,
    summary="Add a shard (probed, checked, migrated, recorded)",
    response_model=Shard,
    responses=errors(400, 404, 409, 503),
)
async def add_shard(body: ShardIn, caller: Admin, runtime: RuntimeDep) -> dict[str, Any]:
    shard = await shard_admin.register_shard(
        runtime.metadata,
        runtime.settings.schema_dir,
        runtime.settings.pools,
        body.name,
        body.group,
        body.dsn,
        force=body.force,
    )
    await runtime.catalog.reload()
    shown = shard_json(shard)
    await runtime.self_audit.record(
        caller.actor,
        "shard.add",
        shard.name,
        group=shard.group,
        dsn=shown["dsn"],
        force=body.force,
        token_id=caller.token_id,
    )
    return shown


@router.patch(
    "/shards/{name}",
    summary="Set a shard's state: active, draining or down",
    response_model=Shard,
    responses=errors(400, 404),
)
async def set_shard_state(
    name: Name, body: ShardStateIn, caller: Admin, runtime: RuntimeDep
) -> dict[str, Any]:
    shard = await store.set_shard_state(runtime.metadata, name, body.state)
    await runtime.catalog.reload()
    await runtime.self_audit.record(
        caller.actor, "shard.state", shard.name, state=shard.state, token_id=caller.token_id
    )
    return shard_json(shard)


@router.post(
    "/shards/{name}/drain",
    summary="Stop placing new rows on a shard",
    response_model=Shard,
    responses=errors(404),
)
async def drain_shard(name: Name, caller: Admin, runtime: RuntimeDep) -> dict[str, Any]:
    return await set_shard_state(name, ShardStateIn(state="draining"), caller, runtime)


@router.get(
    "/owners",
    summary="The group an owner is mapped to",
    response_model=Owner,
    responses=errors(404),
)
async def get_owner(
    runtime: RuntimeDep, kind: OwnerKind, key: str = Query(min_length=1, max_length=256)
) -> dict[str, Any]:
    mapping = await store.get_owner(runtime.metadata, kind, key)
    if mapping is None:
        raise NotFound(f"{kind} owner is not mapped to a group yet", "key")
    return owner_json(mapping)


@router.put(
    "/owners",
    summary="Map an owner to a group",
    response_model=Owner,
    responses=errors(400, 404, 409),
)
async def map_owner(body: OwnerMapIn, caller: Admin, runtime: RuntimeDep) -> dict[str, Any]:
    mapping = await store.map_owner(
        runtime.metadata, body.kind, body.key, body.group, body.tenant, force=body.force
    )
    await mirror.remirror(runtime.metadata, runtime.pools, mapping)
    await runtime.self_audit.record(
        caller.actor,
        "owner.map",
        f"{mapping.kind} {mapping.key}",
        group=mapping.group,
        tenant=mapping.tenant,
        force=body.force,
        token_id=caller.token_id,
    )
    return owner_json(mapping)
