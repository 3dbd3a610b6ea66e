"""The promotion of an owner-day from the shared table to its own (issue 38, step 4;
docs/architecture.md, "Promotion"): writers keep writing and a consistent cursor stays open
across the move, and in the end every row written is there once with its id, the cursor's
pages are the rows its snapshot saw, a keyed retry after the move writes nothing; a promotion
killed inside its move leaves every row where it was, and the next run completes it. The
oracle is what the test wrote."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import asyncpg
import httpx
import orjson
import pytest

from bench.shard_view import catalog_shards, owner_id, shard_sql
from router.db.names import day_table, owner_days_table
from router.search import freshness, sql
from router.search.query import AuditQuery, Keys, Window
from router.settings import REPO_ROOT, Settings
from tests.support import (
    another_router,
    await_token,
    bearer,
    cli_env,
    clock_now,
    eventually,
    issue_token,
    past_day,
    placed_ids,
    run_cli,
    running_router,
    search_items,
    shared_days_dropped_after,
)
from tests.tail_client import TailClient

DAY = past_day(7, 12)
WINDOW = {
    "from": (DAY - timedelta(hours=12)).isoformat(),
    "to": (DAY + timedelta(hours=12)).isoformat(),
}
OWN_TABLE_ROWS = 8
SHARING = {
    "SHARDLOG_SHARED__ENABLED": "true",
    "SHARDLOG_SHARED__OWN_TABLE_ROWS": str(OWN_TABLE_ROWS),
    # The test promotes by `shardlog sharing promote`; the router's job would too, later.
    "SHARDLOG_SHARED__PROMOTE_INTERVAL_S": "3600",
    # No reader plans meanwhile here; the wait is the same code path, shorter.
    "SHARDLOG_SHARED__PROMOTE_SETTLE_S": "0.2",
    "SHARDLOG_RETENTION__ENABLED": "false",
}


@pytest.fixture(scope="module")
def client(
    settings: Settings, tmp_path_factory: pytest.TempPathFactory, api: httpx.Client
) -> Iterator[httpx.Client]:
    # This router sends every small part shared, as owner-days written through several routers
    # (or one restarted) are: each router counts only what it sent. The promotion runs (the
    # CLI's, with SHARING) still take OWN_TABLE_ROWS as their threshold.
    router_sharing = {**SHARING, "SHARDLOG_SHARED__OWN_TABLE_ROWS": "100000"}
    router = another_router(settings, tmp_path_factory.mktemp("promoting-router"), router_sharing)
    with (
        shared_days_dropped_after(settings, catalog_shards(api)),
        running_router(router),
        httpx.Client(
            base_url=router.url, headers={"Authorization": api.headers["Authorization"]}, timeout=60
        ) as session,
    ):
        yield session


def post(client: httpx.Client, records: list[dict[str, Any]], key: str) -> None:
    response = client.post(
        "/v1/audit",
        content=b"".join(orjson.dumps(r) + b"\n" for r in records),
        headers={"content-type": "application/x-ndjson", "Idempotency-Key": key},
    )
    assert response.status_code == 200, response.text


def batch(owner: str, tag: str, n: int = 4) -> list[dict[str, Any]]:
    return [
        {"owner": owner, "ts": (DAY + timedelta(seconds=i)).isoformat(), "content": f"{tag} {i}"}
        for i in range(n)
    ]


def promote(settings: Settings) -> dict[str, Any]:
    done = run_cli(
        settings, "sharing", "promote", "--json", "--day", DAY.date().isoformat(), env=SHARING
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def where(api: httpx.Client, owner: str) -> dict[str, list[int]]:
    """Where the owner's rows of DAY are: the ids in shared tables, the ids in own tables."""
    ident = owner_id(api, "audit", owner)
    assert ident is not None
    return placed_ids(catalog_shards(api), "audit", ident, DAY.date())


def metadata_value(settings: Settings, text: str, *args: Any) -> Any:
    async def read() -> Any:
        connection = await asyncpg.connect(settings.metadata_dsn())
        try:
            return await connection.fetchval(text, *args)
        finally:
            await connection.close()

    return asyncio.run(read())


def catalog_version(settings: Settings) -> int:
    return int(metadata_value(settings, "SELECT version FROM catalog_version"))


def owner_flag(settings: Settings, owner: str) -> bool:
    return bool(
        metadata_value(
            settings, "SELECT own_tables FROM owners WHERE kind = 'audit' AND key = $1", owner
        )
    )


def contents(client: httpx.Client, owner: str) -> list[str]:
    items = search_items(client, "audit", {"owner": owner, **WINDOW, "limit": 1000})
    return sorted(item["content"] for item in items)


def test_a_promotion_under_writes_and_an_open_cursor_loses_doubles_and_misses_nothing(
    client: httpx.Client, api: httpx.Client, settings: Settings
) -> None:
    owner = f"promoted-{uuid.uuid4().hex[:8]}"
    keys = {f"early{n}": uuid.uuid4().hex for n in range(8)}
    for tag, key in keys.items():
        post(client, batch(owner, tag), key)
    before = where(api, owner)
    assert len(before["shared"]) == 32 and before["own"] == [], before
    params = {"owner": owner, **WINDOW, "limit": 5, "consistent": "true"}
    first = client.get("/v1/audit/search", params=params).json()
    seen = [item["content"] for item in first["items"]]

    late = {f"late{n}": uuid.uuid4().hex for n in range(16)}

    def write(item: tuple[str, str]) -> None:
        post(client, batch(owner, item[0]), item[1])

    version = catalog_version(settings)
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        writing = pool.map(write, late.items())
        report = promote(settings)
        list(writing)
    # Marked: its next days start in its own tables; no router had to drop its caches.
    assert owner_flag(settings, owner) is True
    assert catalog_version(settings) == version
    moved = sum(p["rows"] for p in report["promoted"])
    assert report["promoted"] and moved > 0 and not report["failed"], report
    # The consistent cursor's pages are the rows its snapshot saw: the early ones, each once.
    cursor = first["next_cursor"]
    while cursor:
        page = client.get("/v1/audit/search", params={**params, "cursor": cursor}).json()
        seen += [item["content"] for item in page["items"]]
        cursor = page["next_cursor"]
    early = sorted(f"{tag} {i}" for tag in keys for i in range(4))
    assert sorted(seen) == early
    # Every row written, once; ids unique per shard; a keyed retry after the move is skipped.
    expected = sorted(early + [f"{tag} {i}" for tag in late for i in range(4)])
    assert contents(client, owner) == expected
    post(client, batch(owner, "early0"), keys["early0"])
    assert contents(client, owner) == expected
    items = search_items(client, "audit", {"owner": owner, **WINDOW, "limit": 1000})
    assert len({(i["shard"], i["id"]) for i in items}) == len(items)
    after = where(api, owner)
    assert len(after["own"]) >= moved and len(after["own"]) + len(after["shared"]) == len(expected)
    # The next run finds nothing left over the threshold where it moved.
    again = promote(settings)
    assert not again["failed"], again


async def test_a_promotion_killed_inside_its_move_leaves_every_row_in_place(
    client: httpx.Client, api: httpx.Client, settings: Settings
) -> None:
    """The move waits for a writer holding the owner-day's fence; the promotion is killed
    (SIGKILL) while it waits inside its transaction: every row stays in the shared table,
    found by searches, and the next run moves them all."""
    owner = f"killed-{uuid.uuid4().hex[:8]}"
    for n in range(6):
        post(client, batch(owner, f"k{n}"), uuid.uuid4().hex)
    expected = sorted(f"k{n} {i}" for n in range(6) for i in range(4))
    ident = owner_id(api, "audit", owner)
    dsns = catalog_shards(api)
    fence = owner_days_table(DAY.date())
    holders = []
    for dsn in dsns.values():
        connection = await asyncpg.connect(dsn)
        if await connection.fetchval("SELECT to_regclass($1) IS NULL", f'"{fence}"'):
            await connection.close()
            continue
        transaction = connection.transaction()
        await transaction.start()
        await connection.execute(
            f"SELECT 1 FROM \"{fence}\" WHERE owner_id = $1 AND kind = 'audit' FOR SHARE", ident
        )
        holders.append((connection, transaction))
    env = {**cli_env(settings), **SHARING, "SHARDLOG_SHARED__PROMOTE_LOCK_TIMEOUT_MS": "60000"}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "router.cli",
        "sharing",
        "promote",
        "--day",
        DAY.date().isoformat(),
        env=env,
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:

        def waiting() -> bool:
            for dsn in dsns.values():
                found = shard_sql(
                    dsn,
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    f"AND query LIKE 'UPDATE \"{fence}\"%'",
                )
                if found.strip() not in ("", "0"):
                    return True
            return False

        await asyncio.to_thread(eventually, waiting, 30)
        process.kill()
        await asyncio.wait_for(process.wait(), 10)
    finally:
        if process.returncode is None:
            process.kill()
        for connection, transaction in holders:
            await transaction.rollback()
            await connection.close()
    assert sorted(contents(client, owner)) == expected
    assert len((await asyncio.to_thread(where, api, owner))["shared"]) == len(expected)
    report = promote(settings)
    assert not report["failed"], report
    assert (await asyncio.to_thread(where, api, owner))["shared"] == []
    assert contents(client, owner) == expected


def test_the_routers_job_promotes_and_counts(
    settings: Settings, tmp_path_factory: pytest.TempPathFactory, api: httpx.Client
) -> None:
    """A router with the job on moves the shared rows of an owner-day of today (or yesterday,
    past a midnight) that outgrew its share to its own table by itself, and says so on
    /metrics."""
    env = {**SHARING, "SHARDLOG_SHARED__PROMOTE_INTERVAL_S": "0.3"}
    router = another_router(settings, tmp_path_factory.mktemp("promotion-job"), env)
    owner = f"job-{uuid.uuid4().hex[:8]}"
    written = [f"now {n} {i}" for n in range(12) for i in range(4)]
    with (
        shared_days_dropped_after(settings, catalog_shards(api)),
        running_router(router),
        httpx.Client(
            base_url=router.url, headers={"Authorization": api.headers["Authorization"]}, timeout=60
        ) as session,
    ):
        # Small requests: each shard's first OWN_TABLE_ROWS rows of the owner-day shared, the
        # rest in its own table; the job moves the shared ones there.
        for n in range(12):
            records = [{"owner": owner, "content": f"now {n} {i}"} for i in range(4)]
            post(session, records, uuid.uuid4().hex)

        def moved() -> float:
            text = httpx.get(f"{router.url}/metrics").text
            name = "shardlog_shared_promoted_rows_total"
            line = next((x for x in text.splitlines() if x.startswith(name)), f"{name} 0")
            return float(line.split()[-1])

        assert eventually(moved, timeout=30) >= OWN_TABLE_ROWS
        window = {
            "from": (clock_now() - timedelta(days=1)).isoformat(),
            "to": (clock_now() + timedelta(hours=1)).isoformat(),
        }
        items = search_items(session, "audit", {"owner": owner, **window, "limit": 1000})
        assert sorted(i["content"] for i in items) == sorted(written)


def test_an_admin_promotes_an_owner_and_lists_the_shared_days(
    client: httpx.Client, api: httpx.Client, settings: Settings
) -> None:
    """POST /v1/admin/owners/promote marks a small owner (its next days go to own tables) and
    the next run moves its shared owner-day however small; GET /v1/admin/sharing lists the
    day's shared tables per shard. Neither is open to a tenant's data token."""
    owner = f"admin-promoted-{uuid.uuid4().hex[:8]}"
    post(client, batch(owner, "small", 3), uuid.uuid4().hex)
    token = issue_token(settings, f"t-{uuid.uuid4().hex[:6]}", ["audit:read", "audit:write"])
    stranger = bearer(await_token(str(api.base_url), token))
    refused = api.post(
        "/v1/admin/owners/promote", json={"kind": "audit", "key": owner}, headers=stranger
    )
    assert refused.status_code == 403, refused.text
    assert api.get("/v1/admin/sharing", headers=stranger).status_code == 403
    assert owner_flag(settings, owner) is False
    unknown = api.post("/v1/admin/owners/promote", json={"kind": "audit", "key": f"{owner}-x"})
    assert unknown.status_code == 404 and unknown.json()["error"]["field"] == "key"
    flows = api.post("/v1/admin/owners/promote", json={"kind": "flow", "key": owner})
    assert flows.status_code in (400, 422) and "kind" in flows.text
    done = api.post("/v1/admin/owners/promote", json={"kind": "audit", "key": owner})
    assert done.status_code == 200, done.text
    assert done.json()["own_tables"] is True and owner_flag(settings, owner) is True
    listed = api.get("/v1/admin/sharing", params={"day": DAY.date().isoformat()}).json()
    audit = [d for d in listed["shard_days"] if d["kind"] == "audit" and d["exists"]]
    assert audit and sum(d["owner_days"] for d in audit) >= 1, listed
    report = promote(settings)
    assert not report["failed"], report
    assert where(api, owner) == {"shared": [], "own": where(api, owner)["own"]}
    assert len(where(api, owner)["own"]) == 3
    assert contents(client, owner) == sorted(f"small {i}" for i in range(3))
    after = api.get("/v1/admin/sharing", params={"day": DAY.date().isoformat()}).json()
    assert sum(d["promoted"] for d in after["shard_days"] if d["kind"] == "audit") >= 1


def test_sharing_status_lists_a_days_shared_tables(
    settings: Settings, client: httpx.Client
) -> None:
    """`shardlog sharing status --day`: what GET /v1/admin/sharing answers, from the CLI."""
    post(client, batch(f"status-{uuid.uuid4().hex[:8]}", "s", 2), uuid.uuid4().hex)
    shown = run_cli(settings, "sharing", "status", "--day", DAY.date().isoformat(), "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["day"] == DAY.date().isoformat() and not data["unreachable"]
    audit = [d for d in data["shard_days"] if d["kind"] == "audit" and d["exists"]]
    assert audit and sum(d["owner_days"] + d["promoted"] for d in audit) >= 1
    bad = run_cli(settings, "sharing", "status", "--day", "2026-13-01")
    assert bad.returncode == 2 and "--day" in bad.stderr


async def test_a_read_planned_before_a_move_reads_the_moved_rows(
    client: httpx.Client, api: httpx.Client, settings: Settings
) -> None:
    """A plan made before a promotion names the owner-day's shared table alone; its rows then
    moved. Read as planned, they are gone; through router/search/freshness.py (what every
    search, count and report runs), the read finds the move and reads the own table too."""
    owner = f"stale-plan-{uuid.uuid4().hex[:8]}"
    for n in range(3):
        await asyncio.to_thread(post, client, batch(owner, f"p{n}"), uuid.uuid4().hex)
    ident = owner_id(api, "audit", owner)
    assert ident is not None
    query = AuditQuery(
        Keys.of([owner]),
        Window(DAY - timedelta(hours=12), DAY + timedelta(hours=12)),
        (),
        "substring",
        "asc",
    )
    planned = [replace(day_table("audit", ident, DAY.date()), own=False, shared=True)]

    def build(tables: list[Any]) -> tuple[str, list[Any]]:
        return sql.count_sql(query, tables)

    dsns = catalog_shards(api)
    before = {}
    for shard, dsn in dsns.items():
        connection = await asyncpg.connect(dsn)
        try:
            with contextlib.suppress(asyncpg.UndefinedTableError):
                before[shard] = (await freshness.read(connection, build, planned, 10))[0][0]
        finally:
            await connection.close()
    assert sum(n or 0 for n in before.values()) == 12, before
    done = await asyncio.to_thread(
        api.post, "/v1/admin/owners/promote", json={"kind": "audit", "key": owner}
    )
    assert done.status_code == 200, done.text
    report = await asyncio.to_thread(promote, settings)
    assert not report["failed"] and report["promoted"], report
    for shard, rows in before.items():
        if not rows:
            continue
        connection = await asyncpg.connect(dsns[shard])
        try:
            text, params = build(planned)
            assert await connection.fetchval(text, *params) in (0, None)  # as planned: gone
            assert (await freshness.read(connection, build, planned, 10))[0][0] == rows
        finally:
            await connection.close()


def test_a_tail_resumed_across_a_move_gets_the_moved_rows_once(
    client: httpx.Client, api: httpx.Client, api_token: str, settings: Settings
) -> None:
    """Rows written shared while a tail was away, then moved by a promotion, are what the
    tail's resume delivers: its log names the shared table, the rows are in the own table
    (router/tail/hub.py with_own_tables); each once, none of those it had."""
    owner = f"tailed-{uuid.uuid4().hex[:8]}"
    stream = TailClient(str(client.base_url), "/v1/audit/tail", {"owner": owner}, api_token)
    with stream.start().subscribed() as tail:
        post(client, [{"owner": owner, "content": "first"}], uuid.uuid4().hex)
        tail.wait(lambda c: len(c.rows()) >= 1)
    last_id = tail.parser.last_id
    assert last_id is not None and [r["content"] for r in tail.rows()] == ["first"]
    between = [{"owner": owner, "content": f"between {n}"} for n in range(6)]
    post(client, between, uuid.uuid4().hex)
    done = api.post("/v1/admin/owners/promote", json={"kind": "audit", "key": owner})
    assert done.status_code == 200, done.text
    today = clock_now().date()
    moved = run_cli(
        settings,
        "sharing",
        "promote",
        "--json",
        *("--day", (today - timedelta(days=1)).isoformat(), "--day", today.isoformat()),
        env=SHARING,
    )
    assert moved.returncode == 0, moved.stderr
    assert sum(p["rows"] for p in json.loads(moved.stdout)["promoted"]) >= 6, moved.stdout
    again = TailClient(str(client.base_url), "/v1/audit/tail", {"owner": owner}, api_token, last_id)
    with again.start().subscribed() as resumed:
        resumed.wait(lambda c: len(c.rows()) >= 6)
        rows = resumed.rows()
    assert sorted(r["content"] for r in rows) == sorted(r["content"] for r in between)
