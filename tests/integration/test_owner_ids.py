"""OwnerDirectory.by_ids (issue 38, step 2): the mappings of owner ids that rows carry, from a
bounded cache and one catalog query for the rest; ids the catalog lacks are left out, a remap
(a new catalog version) is seen once the directory hears of it. The oracle is the admin API's
answer for each key."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace

import asyncpg
import httpx
import pytest

from router.catalog import owners as owner_directory
from router.catalog.cache import CatalogCache
from router.catalog.owners import OwnerDirectory
from router.db import catalog_login
from router.settings import Settings


def mapped(admin_api: httpx.Client, key: str, group: str, tenant: str, force: bool) -> int:
    answer = admin_api.put(
        "/v1/admin/owners",
        json={"kind": "audit", "key": key, "group": group, "tenant": tenant, "force": force},
    )
    assert answer.status_code == 200, answer.text
    return int(answer.json()["id"])


async def test_by_ids_names_known_owners_from_a_bounded_cache(
    admin_api: httpx.Client,
    settings: Settings,
    catalog_pool: asyncpg.Pool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    group = (await asyncio.to_thread(admin_api.get, "/v1/admin/shards")).json()[0]["group"]
    tenants = [f"ids-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    for tenant in tenants:
        answer = await asyncio.to_thread(admin_api.post, "/v1/admin/tenants", json={"name": tenant})
        assert answer.status_code == 201, answer.text
    keys = [f"ids-{uuid.uuid4().hex[:8]}-{n}" for n in range(3)]
    ids = [
        await asyncio.to_thread(mapped, admin_api, key, group, tenants[0], False) for key in keys
    ]
    catalog = CatalogCache(catalog_pool, catalog_login.catalog_dsn(settings), settings.catalog)
    await catalog.reload()
    directory = OwnerDirectory(catalog_pool, catalog)
    unknown = max(ids) + 10**9
    found = await directory.by_ids("audit", [*ids, unknown, ids[0]])
    assert {i: (m.key, m.tenant) for i, m in found.items()} == {
        i: (k, tenants[0]) for i, k in zip(ids, keys, strict=True)
    }
    assert await directory.by_ids("flow", ids) == {}

    # Remapped in the catalog: the directory answers from its cache until the new version
    # reaches it, then from the catalog.
    await asyncio.to_thread(mapped, admin_api, keys[0], group, tenants[1], True)
    assert (await directory.by_ids("audit", [ids[0]]))[ids[0]].tenant == tenants[0]
    await catalog.reload()
    await directory.on_catalog(catalog.snapshot)
    assert (await directory.by_ids("audit", [ids[0]]))[ids[0]].tenant == tenants[1]
    assert await directory.lookup("audit", keys[0]) == replace(found[ids[0]], tenant=tenants[1])

    monkeypatch.setattr(owner_directory, "MAX_CACHED", 2)
    bounded = OwnerDirectory(catalog_pool, catalog)
    for owner_id in ids:
        await bounded.by_ids("audit", [owner_id])
        assert len(bounded) <= 2
    assert set(await bounded.by_ids("audit", ids)) == set(ids)
