"""Ingest into shared tables (issue 38, step 3; docs/architecture.md, "Placement: shared or own",
"The write"): a router with SHARDLOG_SHARED__ENABLED writes small audit owner-days into the
shard's shared table of their day (odd ids), a part that would take the rows it sent an
owner-day's shared table past SHARDLOG_SHARED__OWN_TABLE_ROWS, and every later part of it, into
the owner-day's own table (even ids), every row
once whatever the retries, behind the fence of the owner-day's owner_days row (a promoted
owner-day's next part goes to its own table); searches read both, the live tail delivers rows
written shared. The oracle is what the test wrote."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import asyncpg
import httpx
import orjson
import pytest

from bench.shard_view import catalog_shards, day_tables, owner_id
from router.db import ddl
from router.db.names import owner_days_table, shared_table
from router.settings import Settings
from services.cluster import LocalCluster
from services.router_process import RouterProcess
from tests.support import (
    another_router,
    past_day,
    placed_ids,
    running_router,
    scrape,
    search_items,
    shared_days_dropped_after,
)
from tests.tail_client import TailClient

DAY = past_day(6, 12)
WINDOW = {
    "from": (DAY - timedelta(hours=12)).isoformat(),
    "to": (DAY + timedelta(hours=12)).isoformat(),
}
OWN_TABLE_ROWS = 30


@pytest.fixture(scope="module")
def sharing_router(
    settings: Settings, tmp_path_factory: pytest.TempPathFactory, api: httpx.Client
) -> Iterator[RouterProcess]:
    """A router writing small owner-days shared; the shared days it made are dropped after."""
    env = {
        "SHARDLOG_SHARED__ENABLED": "true",
        "SHARDLOG_SHARED__OWN_TABLE_ROWS": str(OWN_TABLE_ROWS),
        "SHARDLOG_RETENTION__ENABLED": "false",
    }
    router = another_router(settings, tmp_path_factory.mktemp("sharing-router"), env)
    with shared_days_dropped_after(settings, catalog_shards(api)), running_router(router):
        yield router


@pytest.fixture(scope="module")
def client(sharing_router: RouterProcess, api: httpx.Client) -> Iterator[httpx.Client]:
    token = api.headers["Authorization"]
    with httpx.Client(
        base_url=sharing_router.url, headers={"Authorization": token}, timeout=60
    ) as session:
        yield session


def post(client: httpx.Client, records: list[dict[str, Any]], key: str | None = None) -> Any:
    headers = {"content-type": "application/x-ndjson"}
    if key is not None:
        headers["Idempotency-Key"] = key
    response = client.post(
        "/v1/audit", content=b"".join(orjson.dumps(r) + b"\n" for r in records), headers=headers
    )
    assert response.status_code == 200, response.text
    return response.json()


def records(owner: str, n: int, tag: str, start: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "owner": owner,
            "ts": (DAY + timedelta(seconds=start + i)).isoformat(),
            "content": f"{tag} {i}",
            "attrs": {"n": i} if i % 2 else None,
        }
        for i in range(n)
    ]


def placed(api: httpx.Client, owner: str) -> dict[str, list[int]]:
    """Where the owner's rows of DAY are: the ids in shared tables, the ids in own tables."""
    ident = owner_id(api, "audit", owner)
    assert ident is not None
    return placed_ids(catalog_shards(api), "audit", ident, DAY.date())


def mirrored(api: httpx.Client, owner: str) -> set[str]:
    """The tenants the shards' mirrors (shard_owners) give the owner, on the shards holding
    its shared rows: each of them has one, with the owner's key."""
    ident = owner_id(api, "audit", owner)
    shared = f'"{shared_table("audit", DAY.date())}"'

    async def on(dsn: str) -> str | None:
        try:
            connection = await asyncpg.connect(dsn, timeout=5)
        except (OSError, asyncpg.PostgresError):
            return None
        try:
            if not await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", shared):
                return None
            if not await connection.fetchval(
                f"SELECT EXISTS (SELECT 1 FROM {shared} WHERE owner_id = $1)", ident
            ):
                return None
            row = await connection.fetchrow(
                "SELECT tenant, key FROM shard_owners WHERE kind = 'audit' AND owner_id = $1",
                ident,
            )
            assert row is not None and row["key"] == owner, (dsn, row)
            return str(row["tenant"])
        finally:
            await connection.close()

    async def everywhere() -> set[str]:
        found = await asyncio.gather(*(on(dsn) for dsn in catalog_shards(api).values()))
        return {tenant for tenant in found if tenant is not None}

    return asyncio.run(everywhere())


def contents(client: httpx.Client, owner: str) -> list[str]:
    items = search_items(client, "audit", {"owner": owner, **WINDOW, "limit": 1000})
    return [item["content"] for item in items]


def test_small_owner_days_go_to_shared_tables_with_odd_ids(
    client: httpx.Client, api: httpx.Client
) -> None:
    tag = uuid.uuid4().hex[:8]
    owners = [f"small-{tag}-{n}" for n in range(5)]
    for owner in owners:
        post(client, records(owner, 3, "keyed"), key=uuid.uuid4().hex)  # one INSERT each
        post(client, records(owner, 4, "copied", 10))  # no key: COPY
    for owner in owners:
        where = placed(api, owner)
        assert len(where["shared"]) == 7 and where["own"] == [], (owner, where)
        assert all(ident % 2 == 1 for ident in where["shared"]), where
        assert not day_tables(api, "audit", owner_id(api, "audit", owner) or 0)
        expected = [f"keyed {i}" for i in range(3)] + [f"copied {i}" for i in range(4)]
        assert contents(client, owner) == expected
        assert mirrored(api, owner) == {"system"}, owner
        assert contents(api, owner) == expected  # the session's router reads them too


def placed_by_shard(api: httpx.Client, owner: str) -> dict[str, tuple[int, int]]:
    """Per shard holding rows of the owner's DAY: how many are shared, how many in its own
    table (placement is per shard: each shard of the owner's spread counts its own)."""
    ident = owner_id(api, "audit", owner)
    assert ident is not None
    found = {}
    for name, dsn in catalog_shards(api).items():
        ids = placed_ids({name: dsn}, "audit", ident, DAY.date())
        assert all(i % 2 == 1 for i in ids["shared"]) and all(i % 2 == 0 for i in ids["own"])
        if ids["shared"] or ids["own"]:
            found[name] = (len(ids["shared"]), len(ids["own"]))
    return found


def test_a_large_part_goes_to_its_own_table_with_even_ids_and_so_do_later_ones(
    client: httpx.Client, api: httpx.Client
) -> None:
    owner = f"large-{uuid.uuid4().hex[:8]}"
    post(client, records(owner, 4 * OWN_TABLE_ROWS, "big"), key=uuid.uuid4().hex)
    first = placed_by_shard(api, owner)
    assert all(shared == 0 for shared, _ in first.values()), first
    assert sum(own for _, own in first.values()) == 4 * OWN_TABLE_ROWS, first
    post(client, records(owner, 5, "small", 1000), key=uuid.uuid4().hex)
    second = placed_by_shard(api, owner)
    # On a shard the large part outgrew, the small one follows it; on another it is shared.
    for shard, (shared, own) in second.items():
        assert shared == 0 if shard in first else own == 0, second
    assert sum(shared + own for shared, own in second.values()) == 4 * OWN_TABLE_ROWS + 5
    expected = [f"big {i}" for i in range(4 * OWN_TABLE_ROWS)] + [f"small {i}" for i in range(5)]
    assert contents(client, owner) == expected
    count = client.get(
        "/v1/audit/search", params={"owner": owner, **WINDOW, "limit": 1, "count": "exact"}
    ).json()["count"]["value"]
    assert count == len(expected)


def test_an_owner_day_that_outgrows_its_share_writes_on_in_its_own_table(
    client: httpx.Client, api: httpx.Client
) -> None:
    """On each shard, small parts go shared until the next would take the owner-day past
    OWN_TABLE_ROWS there: that one and every later one go to its own table, keyed or COPY."""
    owner = f"growing-{uuid.uuid4().hex[:8]}"
    step = OWN_TABLE_ROWS // 3
    parts = 8
    for n in range(parts):
        post(client, records(owner, step, f"part{n}", n * step), key=uuid.uuid4().hex)
    first = placed_by_shard(api, owner)
    assert sum(shared + own for shared, own in first.values()) == parts * step, first
    for shared, own in first.values():
        assert shared == min(shared + own, 3 * step), first
    post(client, records(owner, 2, "late", parts * step))  # no key: COPY
    second = placed_by_shard(api, owner)
    grown = [shard for shard in second if second[shard] != first.get(shard)]
    assert len(grown) == 1, (first, second)
    shared, own = second[grown[0]]
    before = first.get(grown[0], (0, 0))
    if before[0] == 3 * step:  # the shard it went to had used up its share
        assert (shared, own) == (before[0], before[1] + 2), (first, second)
    else:
        assert (shared, own) == (before[0] + 2, before[1]), (first, second)
    expected = [f"part{n} {i}" for n in range(parts) for i in range(step)] + ["late 0", "late 1"]
    assert contents(client, owner) == expected


def test_a_retried_request_is_written_once(client: httpx.Client, api: httpx.Client) -> None:
    owner = f"retried-{uuid.uuid4().hex[:8]}"
    key = uuid.uuid4().hex
    batch = records(owner, 6, "once")
    for _ in range(3):
        assert post(client, batch, key=key)["accepted"] == 6
    assert len(placed(api, owner)["shared"]) == 6
    assert contents(client, owner) == [f"once {i}" for i in range(6)]


async def fence_everywhere(dsns: dict[str, str], ident: int) -> None:
    for dsn in dsns.values():
        try:
            connection = await asyncpg.connect(dsn, timeout=5)
        except (OSError, asyncpg.PostgresError):
            continue  # a shard another test stopped: no part goes there
        try:
            for relation in ("owner_days", "audit"):
                await ddl.ensure_shared(connection, relation, DAY.date())
            await connection.execute(
                f'INSERT INTO "{owner_days_table(DAY.date())}" (kind, owner_id, promoted) '
                "VALUES ('audit', $1, true) ON CONFLICT (owner_id, kind) "
                "DO UPDATE SET promoted = true",
                ident,
            )
        finally:
            await connection.close()


def test_a_promoted_owner_day_takes_its_next_parts_in_its_own_table(
    client: httpx.Client, api: httpx.Client
) -> None:
    """The fence: once an owner-day's owner_days row says promoted (as the promotion's move
    sets it), a router that still believes it shared writes nothing there, and the part goes
    to the owner-day's own table in the same transaction, keyed or COPY."""
    owner = f"fenced-{uuid.uuid4().hex[:8]}"
    post(client, records(owner, 3, "before"), key=uuid.uuid4().hex)
    ident = owner_id(api, "audit", owner)
    assert ident is not None
    # On every shard of the catalog (the next parts may go to any of the owner's group, and
    # a full suite adds shards): the day's shared tables made there first, as a router would.
    asyncio.run(fence_everywhere(catalog_shards(api), ident))
    redirects = scrape(str(client.base_url), "shardlog_shared_redirects_total")
    post(client, records(owner, 3, "keyed", 100), key=uuid.uuid4().hex)
    post(client, records(owner, 4, "copied", 200))
    # Once per shard the router had written the owner-day shared on: it then knows.
    redirected = scrape(str(client.base_url), "shardlog_shared_redirects_total") - redirects
    assert 1 <= redirected <= 2, redirected
    where = placed(api, owner)
    assert len(where["shared"]) == 3 and len(where["own"]) == 7, where
    assert all(ident % 2 == 0 for ident in where["own"]), where
    expected = (
        [f"before {i}" for i in range(3)]
        + [f"keyed {i}" for i in range(3)]
        + [f"copied {i}" for i in range(4)]
    )
    assert contents(client, owner) == expected


def test_the_tail_delivers_rows_written_shared(
    client: httpx.Client, sharing_router: RouterProcess, api_token: str, api: httpx.Client
) -> None:
    owner = f"tailed-{uuid.uuid4().hex[:8]}"
    stream = TailClient(sharing_router.url, "/v1/audit/tail", {"owner": owner}, api_token)
    with stream.start().subscribed() as tail:
        now = [{"owner": owner, "content": f"live {i}"} for i in range(5)]
        post(client, now, key=uuid.uuid4().hex)
        post(client, [{"owner": owner, "content": "copied"}])
        tail.wait(lambda c: len(c.rows()) >= 6)
        rows = tail.rows()
    assert sorted(r["content"] for r in rows) == sorted(
        [f"live {i}" for i in range(5)] + ["copied"]
    )
    assert all(r["owner"] == owner and r["id"] % 2 == 1 for r in rows), rows


def test_a_shard_stopped_during_shared_writes_loses_and_duplicates_nothing(
    client: httpx.Client, api: httpx.Client, cluster: LocalCluster
) -> None:
    """Writers of small keyed requests keep going while a shard of their group stops for a few
    seconds, retrying with the same Idempotency-Key as documented: every request acknowledged,
    each row once (a part moved to another shard of the group is recorded there before it is
    written, so searches find it), shared until its shard's share of the owner-day is used."""
    owner = f"stopped-{uuid.uuid4().hex[:8]}"
    mapped = api.put(
        "/v1/admin/owners",
        json={"kind": "audit", "key": owner, "group": "group2", "tenant": "system"},
    )
    assert mapped.status_code in (200, 201), mapped.text
    victim = next(s for s in cluster.shards if s.spec.group == "group2")
    batches = [records(owner, 5, f"b{n}", 10 * n) for n in range(40)]

    def write(batch: list[dict[str, Any]]) -> int:
        key = uuid.uuid4().hex
        deadline = time.monotonic() + 45
        while True:
            response = client.post(
                "/v1/audit",
                content=b"".join(orjson.dumps(r) + b"\n" for r in batch),
                headers={"content-type": "application/x-ndjson", "Idempotency-Key": key},
            )
            if response.status_code not in (409, 503) or time.monotonic() > deadline:
                return response.status_code
            time.sleep(0.2)

    stopper = threading.Timer(0.3, victim.stop)
    restarter = threading.Timer(3.0, victim.start)
    stopper.start()
    restarter.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            statuses = list(pool.map(write, batches))
    finally:
        stopper.join()
        restarter.join()
        victim.start()
    assert statuses == [200] * len(batches)
    expected = sorted(f"b{n} {i}" for n in range(40) for i in range(5))
    assert sorted(contents(client, owner)) == expected
    # At most OWN_TABLE_ROWS rows shared per shard (failed attempts count too), the rest in the
    # owner-day's own table.
    for shared, _ in placed_by_shard(api, owner).values():
        assert shared <= OWN_TABLE_ROWS, shared
