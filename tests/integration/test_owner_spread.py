"""The spread width against the real cluster: an owner's rows go to the first `spread` shards
of its rendezvous order, and a search finds every row across spread changes, a write moved
outside the spread by a down shard, and retention (searches are planned from day_tables)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import asyncpg
import httpx
import orjson
import pytest

from bench.shard_view import day_tables, owner_id
from router import clock
from router.catalog import store
from router.errors import Invalid, NotFound
from router.routing.placement import spread_order
from router.settings import IngestSettings
from tests.support import eventually, map_audit_owner, run_cli, search_items

NOW = clock.now().replace(microsecond=0)


def mapped_owner(api: httpx.Client) -> tuple[str, int, list[str]]:
    """A new owner mapped by hand (spread: the whole group), its id and its group's shards."""
    key, group = map_audit_owner(api, "spread")
    shards = sorted(
        s["name"]
        for s in api.get("/v1/admin/shards").json()
        if s["group"] == group and s["state"] == "active"
    )
    ident = owner_id(api, "audit", key)
    assert ident is not None
    return key, ident, shards


async def set_spread(api: httpx.Client, pool: asyncpg.Pool, key: str, spread: int | None) -> None:
    """Set the spread and wait until the router has the catalog version it bumped."""
    await store.set_spread(pool, "audit", key, spread)
    seen(api, await store.catalog_version(pool))


def seen(api: httpx.Client, version: int) -> None:
    eventually(lambda: api.get("/health/ready").json()["catalog_version"] >= version)


def write(api: httpx.Client, key: str, rows: int, tag: str, ts: datetime = NOW) -> None:
    records = [
        {"owner": key, "content": f"{tag} {i}", "ts": (ts - timedelta(seconds=i)).isoformat()}
        for i in range(rows)
    ]
    response = api.post(
        "/v1/audit",
        content=b"".join(orjson.dumps(r) + b"\n" for r in records),
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.status_code == 200, response.text


def search_all(api: httpx.Client, key: str, days: int = 1) -> list[str]:
    params = {
        "owner": key,
        "from": (NOW - timedelta(days=days)).isoformat(),
        "to": (NOW + timedelta(minutes=1)).isoformat(),
        "limit": 1000,
    }
    return sorted(item["content"] for item in search_items(api, "audit", params))


def contents(*batches: tuple[str, int]) -> list[str]:
    return sorted(f"{tag} {i}" for tag, rows in batches for i in range(rows))


async def test_a_spread_of_one_writes_to_the_first_shard_of_the_owner_order(
    api, catalog_pool
) -> None:
    key, ident, shards = mapped_owner(api)
    await set_spread(api, catalog_pool, key, 1)
    for n in range(5):
        write(api, key, 1500, f"w{n}")  # large enough for a part per shard of a wider spread
    assert set(day_tables(api, "audit", ident)) == {spread_order(ident, shards)[0]}
    assert search_all(api, key) == contents(*((f"w{n}", 1500) for n in range(5)))


async def test_searches_find_every_row_across_spread_changes(api, catalog_pool) -> None:
    key, ident, shards = mapped_owner(api)
    await set_spread(api, catalog_pool, key, 1)
    write(api, key, 300, "narrow")
    await set_spread(api, catalog_pool, key, None)  # the whole group: every shard catches up
    # A shard another test stopped a moment ago may still be cooling down in the router's
    # health: its parts go elsewhere until it is back, so write until every shard has some.
    wide: list[str] = []

    def everywhere() -> bool:
        wide.append(f"wide{len(wide)}")
        write(api, key, 1000 * len(shards), wide[-1])
        return set(day_tables(api, "audit", ident)) == set(shards)

    eventually(everywhere, timeout=30, interval=0.5)
    await set_spread(api, catalog_pool, key, 1)  # narrower again: earlier rows stay put
    write(api, key, 200, "again")
    assert search_all(api, key) == contents(
        ("narrow", 300), *((tag, 1000 * len(shards)) for tag in wide), ("again", 200)
    )


@pytest.mark.slow
async def test_a_write_moved_outside_the_spread_by_a_down_shard_is_found(
    api, cluster, catalog_pool
) -> None:
    launched = {s.spec.name: s for s in cluster.shards}
    # An owner whose one shard is one of the cluster's own instances (other tests add shards
    # to the group inside databases of those instances).
    key, ident, shards = mapped_owner(api)
    while spread_order(ident, shards)[0] not in launched:
        key, ident, shards = mapped_owner(api)
    await set_spread(api, catalog_pool, key, 1)
    inside = spread_order(ident, shards)[0]
    victim = launched[inside]
    victim.stop()
    try:
        for n in range(3):
            write(api, key, 200, f"moved{n}")
    finally:
        victim.start()
    placed = day_tables(api, "audit", ident)
    assert inside not in placed and placed, placed  # placement.fallback took another shard
    # Once the router's cool-down of the failed shard is over, new rows go back to the spread
    # (which also leaves the shard healthy for the tests after this one).
    backs = []

    def back_inside() -> bool:
        backs.append(f"back{len(backs)}")
        write(api, key, 100, backs[-1])
        return inside in day_tables(api, "audit", ident)

    eventually(back_inside, timeout=20, interval=0.5)
    assert search_all(api, key) == contents(
        *((f"moved{n}", 200) for n in range(3)), *((tag, 100) for tag in backs)
    )


async def test_retention_drops_old_days_of_a_spread_owner_and_keeps_the_rest(
    api, settings, catalog_pool
) -> None:
    key, ident, shards = mapped_owner(api)
    await set_spread(api, catalog_pool, key, 1)
    write(api, key, 50, "old", NOW - timedelta(days=10))
    await set_spread(api, catalog_pool, key, None)
    write(api, key, 1000 * len(shards), "new")
    response = api.put(
        "/v1/admin/retention/policies",
        json={"kind": "audit", "group": _group_of(api, key), "owner": key, "keep_days": 5},
    )
    assert response.status_code == 200, response.text
    result = run_cli(settings, "retention", "run", "--owner", key, "--json")
    assert result.returncode == 0, result.stderr
    assert search_all(api, key, days=20) == contents(("new", 1000 * len(shards)))
    tables = {t for names in day_tables(api, "audit", ident).values() for t in names}
    # The new rows go back a second each from NOW: soon after midnight UTC, into yesterday.
    new_days = {NOW, NOW - timedelta(seconds=1000 * len(shards) - 1)}
    assert tables == {f"audit_o{ident}_{day:%Y%m%d}" for day in new_days}


def _group_of(api: httpx.Client, key: str) -> str:
    response = api.get("/v1/admin/owners", params={"kind": "audit", "key": key})
    assert response.status_code == 200, response.text
    return str(response.json()["group"])


async def test_widening_never_narrows_and_bad_spreads_are_refused(api, catalog_pool) -> None:
    key, ident, _ = mapped_owner(api)
    await set_spread(api, catalog_pool, key, 2)
    assert (await store.widen_spread(catalog_pool, "audit", ident, 1)).spread == 2
    assert (await store.widen_spread(catalog_pool, "audit", ident, 4)).spread == 4
    assert (await store.widen_spread(catalog_pool, "audit", ident, None)).spread is None
    assert (await store.widen_spread(catalog_pool, "audit", ident, 2)).spread is None
    with pytest.raises(Invalid):
        await store.set_spread(catalog_pool, "audit", key, 0)
    with pytest.raises(NotFound):
        await store.set_spread(catalog_pool, "audit", f"nobody-{uuid.uuid4().hex}", 1)


async def test_owners_first_mapped_by_a_write_get_the_configured_spread(api, catalog_pool) -> None:
    key = f"spread-{uuid.uuid4().hex[:10]}"
    write(api, key, 10, "first")
    mapping = await store.get_owner(catalog_pool, "audit", key)
    assert mapping is not None and mapping.spread == IngestSettings().spread_min_shards
    assert search_all(api, key) == contents(("first", 10))
