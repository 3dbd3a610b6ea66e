"""Admin actions that would lock the platform out or orphan what a tenant holds are refused
unless forced: the last usable admin token, a tenant with tokens or exporters (keys: always),
a group that is not empty."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import asyncpg
import httpx
import pytest

from router import clock
from router.auth import store
from router.auth.scopes import ADMIN, SYSTEM_TENANT
from router.db.migrate import migrate
from router.errors import Conflict
from router.settings import Settings
from services.cluster import LocalCluster
from tests.support import run_cli


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def catalog(cluster: LocalCluster, settings: Settings) -> AsyncIterator[asyncpg.Pool]:
    """A catalog of its own (a fresh metadata database), so that its admin tokens can all be
    revoked without locking the session's router out."""
    instance = cluster.metadata
    name = unique("admin_safety_")
    instance.psql("postgres", f"CREATE DATABASE {name}")
    pool = await asyncpg.create_pool(instance.spec.dsn(name), min_size=1, max_size=4)
    try:
        async with pool.acquire() as connection:
            await migrate(connection, settings.schema_dir, "metadata")
        yield pool
    finally:
        await pool.close()
        instance.psql("postgres", f"DROP DATABASE {name} WITH (FORCE)")


async def _admin(catalog: asyncpg.Pool, **extra: datetime) -> str:
    record, _ = await store.create_token(catalog, SYSTEM_TENANT, "admin", [ADMIN], "test", **extra)
    return record.id


async def test_the_last_usable_admin_token_is_kept(catalog: asyncpg.Pool) -> None:
    first, second = await _admin(catalog), await _admin(catalog)
    # A data token and an admin token that will have expired do not count as a way back in.
    data, _ = await store.create_token(catalog, SYSTEM_TENANT, "data", ["audit:read"], "test")
    expired = await _admin(catalog, expires_at=clock.now() - timedelta(minutes=1))
    assert (await store.revoke_token(catalog, first)).revoked_at is not None
    await store.revoke_token(catalog, data.id)
    with pytest.raises(Conflict, match="last usable admin token") as refused:
        await store.revoke_token(catalog, second)
    assert refused.value.field == "token_id"
    still = await store.get_token(catalog, second)
    assert still is not None and still.revoked_at is None
    # An expired admin token may go; so may the last one, when forced.
    assert (await store.revoke_token(catalog, expired)).revoked_at is not None
    assert (await store.revoke_token(catalog, second, force=True)).revoked_at is not None


async def test_two_revocations_at_once_keep_one_admin_token(catalog: asyncpg.Pool) -> None:
    tokens = [await _admin(catalog) for _ in range(2)]
    outcomes = await asyncio.gather(
        *(store.revoke_token(catalog, token) for token in tokens), return_exceptions=True
    )
    assert sorted(type(o).__name__ for o in outcomes) == ["Conflict", "TokenRecord"]
    left = [t for t in await store.list_tokens(catalog) if t.revoked_at is None]
    assert len(left) == 1


def test_the_api_revokes_an_admin_token_while_another_is_usable(api: httpx.Client) -> None:
    made = api.post(
        "/v1/admin/tokens",
        json={"tenant": SYSTEM_TENANT, "name": "spare", "scopes": [ADMIN]},
    ).json()
    revoked = api.delete(f"/v1/admin/tokens/{made['id']}")
    assert revoked.status_code == 200 and revoked.json()["state"] == "revoked"


def test_a_tenant_with_tokens_goes_only_when_forced(api: httpx.Client) -> None:
    tenant = unique("t")
    assert api.post("/v1/admin/tenants", json={"name": tenant}).status_code == 201
    token = api.post(
        "/v1/admin/tokens", json={"tenant": tenant, "name": "x", "scopes": ["audit:read"]}
    ).json()
    refused = api.delete(f"/v1/admin/tenants/{tenant}")
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["field"] == "name" and "1 tokens (1 usable)" in error["message"]
    assert api.get(f"/v1/admin/tokens/{token['id']}").status_code == 200
    assert api.delete(f"/v1/admin/tenants/{tenant}", params={"force": "true"}).status_code == 204
    assert api.get(f"/v1/admin/tokens/{token['id']}").status_code == 404


def test_keys_are_never_orphaned_even_when_forced(api: httpx.Client) -> None:
    tenant, key = unique("t"), unique("o")
    assert api.post("/v1/admin/tenants", json={"name": tenant}).status_code == 201
    group = "group1"
    mapped = {"kind": "audit", "key": key, "group": group, "tenant": tenant}
    assert api.put("/v1/admin/owners", json=mapped).status_code == 200
    forced = api.delete(f"/v1/admin/tenants/{tenant}", params={"force": "true"})
    assert forced.status_code == 409
    assert "owns 1 owner or switch keys" in forced.json()["error"]["message"]


def test_an_empty_group_is_removed_and_a_busy_one_is_not(
    api: httpx.Client, settings: Settings
) -> None:
    name = unique("g")
    assert api.post("/v1/admin/groups", json={"name": name}).status_code == 201
    policy = {"kind": "audit", "group": name, "keep_days": 30}
    assert api.put("/v1/admin/retention/policies", json=policy).status_code in (200, 201)
    busy = "group1"  # the session topology's, with shards
    refused = api.delete(f"/v1/admin/groups/{busy}")
    assert refused.status_code == 409 and "is not empty" in refused.json()["error"]["message"]
    assert api.delete(f"/v1/admin/groups/{name}").status_code == 204
    assert name not in {g["name"] for g in api.get("/v1/admin/groups").json()}
    assert api.delete(f"/v1/admin/groups/{name}").status_code == 404
    via_cli = unique("g")
    assert run_cli(settings, "groups", "add", via_cli).returncode == 0
    removed = run_cli(settings, "groups", "remove", via_cli)
    assert removed.returncode == 0, removed.stderr
    assert f"removed group {via_cli}" in removed.stdout


def test_a_forced_removal_takes_the_tenants_syslog_senders(api: httpx.Client) -> None:
    tenant = unique("t")
    assert api.post("/v1/admin/tenants", json={"name": tenant}).status_code == 201
    sender = "192.0.2.0/28"
    mapped = api.put(f"/v1/admin/syslog-senders/{sender}", json={"tenant": tenant})
    assert mapped.status_code in (200, 201), mapped.text
    refused = api.delete(f"/v1/admin/tenants/{tenant}")
    assert refused.status_code == 409 and "1 syslog senders" in refused.json()["error"]["message"]
    assert api.delete(f"/v1/admin/tenants/{tenant}", params={"force": "true"}).status_code == 204
    left = api.get("/v1/admin/syslog-senders", params={"tenant": tenant})
    assert left.status_code == 200 and left.json() == []
