"""The postgres_fdw path over shared tables (issue 38, step 2; docs/architecture.md, "Reading both
layouts", fdw): the coordinator's shared parents (fdw.audit_shared, fdw.flow_shared) get a foreign
child per shard and shared day when the ahead job registers the shard-day, lose it when retention
drops the day (and get it back when the drop fails), and `tables sync` repairs a missing one; a
backend=fdw search reads the shared rows of its owners beside their own parents, with the answers
and cursors of backend=fanout, for owners with own tables only, both, or shared rows only.

The dataset is test_shared_reads's (its day, rows and move): owners and switches write a past
day through the REST API, then the test moves all of one's rows, half of another's and none of a
third's into the shared tables with their ids. The oracle is the fan-out path, which
test_shared_reads holds to the answers before the move."""

from __future__ import annotations

import asyncio
import random
import re
import uuid
from collections.abc import AsyncIterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from bench.shard_view import catalog_shards, day_tables, owner_id
from router import clock
from router.auth.scopes import DATA_SCOPES
from router.catalog import store, tables
from router.catalog.snapshot import CatalogSnapshot
from router.db import catalog_login
from router.db.names import (
    Kind,
    day_table,
    shared_foreign_table,
    shared_parent,
    shared_table,
)
from router.db.pools import ShardPools
from router.retention import inventory
from router.retention.runner import RetentionRunner, RunOptions
from router.search import fdw, sql
from router.search.query import AuditQuery, Keys, Window
from router.settings import Settings
from router.sharing.ahead import make_ahead
from services.cluster import LocalCluster
from tests.integration import test_compacted_flows as compacted_flows
from tests.integration import test_compacted_reads as compacted_reads
from tests.integration.test_compacted_reads import answer, pages
from tests.integration.test_search import post
from tests.integration.test_shared_reads import (
    DAY,
    KEY,
    SEARCH,
    WINDOW,
    flow_records,
    move_rows,
    rows_of,
)
from tests.support import (
    another_router,
    await_token,
    bearer,
    drop_shared_days,
    eventually,
    expired_shared_day,
    issue_token,
    running_router,
    scrape,
)

KINDS: tuple[Kind, ...] = ("audit", "flow")
# How much of an owner's rows move into the shared tables, by its role in the test.
MOVED = {"own": "none", "both": "half", "shared": "all"}
SHAPES: dict[Kind, list[dict[str, Any]]] = {
    "audit": [{}, {"q": "alpha"}, {"q": ["alpha", "beta"]}],
    "flow": [{}, {"dst_port": "443"}],
}


async def children(metadata: asyncpg.Pool, days: list[date]) -> set[tuple[str, date, str]]:
    """The coordinator's shared children of ``days`` (kind, day, shard), each checked to be a
    foreign table under its kind's shared parent."""
    rows = await metadata.fetch(
        "SELECT c.kind, c.day, c.shard, p.inhparent = to_regclass('fdw.' || c.kind || '_shared') "
        "AS under_parent, f.ftrelid "
        "FROM fdw.children AS c LEFT JOIN pg_inherits AS p ON p.inhrelid = c.child "
        "LEFT JOIN pg_foreign_table AS f ON f.ftrelid = c.child "
        "WHERE c.owner_id IS NULL AND c.day = ANY($1::date[])",
        days,
    )
    for row in rows:
        assert row["under_parent"] and row["ftrelid"] is not None, row
    return {(row["kind"], row["day"], row["shard"]) for row in rows}


async def foreign_tables(metadata: asyncpg.Pool, days: list[date], shards: list[str]) -> int:
    names = [shared_foreign_table(k, d, s) for k in KINDS for d in days for s in shards]
    found = await metadata.fetchval(
        "SELECT count(*) FROM unnest($1::text[]) AS n WHERE to_regclass(n) IS NOT NULL", names
    )
    return int(found)


@pytest.fixture(scope="module")
async def metadata(api: httpx.Client, settings: Settings) -> AsyncIterator[asyncpg.Pool]:
    pool = await catalog_login.open_pool(settings)
    yield pool
    await pool.close()


@pytest.fixture(scope="module")
async def world(
    api: httpx.Client, settings: Settings, metadata: asyncpg.Pool
) -> AsyncIterator[tuple[CatalogSnapshot, ShardPools]]:
    snapshot = await store.load_snapshot(metadata)
    pools = ShardPools(settings.pools)
    await pools.reconcile(snapshot)
    yield snapshot, pools
    await pools.close()


@pytest.fixture(scope="module")
async def ahead(
    api: httpx.Client, metadata: asyncpg.Pool, world: tuple[CatalogSnapshot, ShardPools]
) -> AsyncIterator[dict[str, Any]]:
    """DAY's shared tables made, registered and attached by the ahead job, twice; dropped with
    their registry rows, children and the owners' owner_shards rows afterwards."""
    snapshot, pools = world
    first = await make_ahead(metadata, pools, snapshot, [DAY.date()])
    again = await make_ahead(metadata, pools, snapshot, [DAY.date()])
    yield {"first": first, "again": again}
    await drop_shared_days(metadata, catalog_shards(api), [DAY.date()])
    await metadata.execute("DELETE FROM owner_shards WHERE since = $1", DAY.date())


@pytest.fixture(scope="module")
async def moved(
    api: httpx.Client, metadata: asyncpg.Pool, ahead: dict[str, Any]
) -> dict[Kind, dict[str, str]]:
    """Owners and switches of every role, their rows moved into the shared tables by role."""
    tag = uuid.uuid4().hex[:8]
    keys: dict[Kind, dict[str, str]] = {
        "audit": {role: f"fdw-{tag}-{role}" for role in MOVED},
        "flow": {role: f"fdw-flows-{tag}-{role}" for role in MOVED},
    }
    rng = random.Random(3838)
    for owner in keys["audit"].values():
        rows = rows_of(owner, rng)
        for start in range(0, len(rows), 20):  # several requests: several shards
            post(api, "/v1/audit", rows[start : start + 20])  # type: ignore[no-untyped-call]
    for switch in keys["flow"].values():
        records = flow_records(switch, rng)
        for start in range(0, len(records), 25):
            compacted_flows.post(api, records[start : start + 25])
    dsns = catalog_shards(api)
    for kind in KINDS:
        for role, key in keys[kind].items():
            ident = owner_id(api, kind, key)
            assert ident is not None
            shards = list(day_tables(api, kind, ident))
            assert len(shards) >= 2, (key, shards)  # the spread: several shards per owner-day
            if MOVED[role] == "none":
                continue
            for shard in shards:
                table = day_table(kind, ident, DAY.date())
                assert await move_rows(dsns[shard], table, MOVED[role], metadata, shard) > 0
    return keys


def both_ways(api: httpx.Client, kind: Kind, params: dict[str, Any]) -> None:
    """backend=fdw answers ``params`` page by page as backend=fanout does (items, counts,
    cursors), and a fan-out cursor continues through the coordinator to the same pages."""
    path = SEARCH[kind]
    fanout = pages(api, {**params, "backend": "fanout"}, path=path)
    fdw_pages = pages(api, {**params, "backend": "fdw"}, path=path)
    assert answer(fdw_pages) == answer(fanout), params
    assert sum(len(page["items"]) for page in fanout) > 0, params
    if fanout[0]["next_cursor"]:
        rest = pages(api, {**params, "backend": "fdw"}, fanout[0]["next_cursor"], path)
        assert answer(rest) == answer(fanout[1:]), params
    cursor, back = fanout[-1]["prev_cursor"], list[Any]()
    while cursor:
        page = api.get(path, params={**params, "backend": "fdw", "cursor": cursor}).json()
        back.insert(0, page["items"])
        cursor = page["prev_cursor"]
    assert back == [page["items"] for page in fanout[:-1]], params


def made_on(snapshot: CatalogSnapshot, report: Any) -> list[str]:
    """The shards an ahead run made its tables on: those not marked down that it reached (a
    full suite leaves shards of other tests in the catalog, some stopped)."""
    serving = {name for name, shard in snapshot.shards.items() if shard.state != "down"}
    return sorted(serving - set(report.unreachable))


async def test_the_ahead_job_attaches_a_child_per_shard_kind_and_day(
    metadata: asyncpg.Pool, ahead: dict[str, Any], world: tuple[CatalogSnapshot, ShardPools]
) -> None:
    shards = made_on(world[0], ahead["first"])
    expected = {(kind, DAY.date(), shard) for kind in KINDS for shard in shards}
    found = await children(metadata, [DAY.date()])
    assert found == expected
    assert {(k, d, s) for s, k, d in ahead["first"].attached} == expected
    assert ahead["again"].attached == [] and not ahead["again"].unreachable
    assert ahead["first"].to_json()["attached"]


@pytest.mark.parametrize("kind", KINDS)
def test_fdw_pages_and_counts_equal_fanout_over_every_layout(
    api: httpx.Client, moved: dict[Kind, dict[str, str]], kind: Kind
) -> None:
    keys = list(moved[kind].values())
    for form in compacted_reads.forms(keys, SHAPES[kind], KEY[kind], WINDOW):
        both_ways(api, kind, form)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("role", list(MOVED))
def test_each_owner_alone_reads_the_same_through_the_coordinator(
    api: httpx.Client, moved: dict[Kind, dict[str, str]], kind: Kind, role: str
) -> None:
    """An owner with rows in shared tables only has no own parent (its day tables are gone):
    the shared parent alone answers for it."""
    params: dict[str, Any] = {KEY[kind]: moved[kind][role], **WINDOW, "limit": 11, "count": "exact"}
    both_ways(api, kind, params)
    for order in ("asc", "desc"):
        one = {**params, "order": order, "limit": 1000}
        fanout = api.get(SEARCH[kind], params={**one, "backend": "fanout"}).json()
        through = api.get(SEARCH[kind], params={**one, "backend": "fdw"}).json()
        assert (through["items"], through["count"]) == (fanout["items"], fanout["count"])
        assert fanout["count"]["value"] == len(fanout["items"]) > 0


@pytest.mark.parametrize("kind", KINDS)
def test_a_foreign_tenant_reads_nothing_through_the_coordinator(
    api: httpx.Client, settings: Settings, moved: dict[Kind, dict[str, str]], kind: Kind
) -> None:
    """A token of another tenant names the owners (403) or none (its own reach: nothing of
    theirs, whichever layout holds their rows)."""
    token = issue_token(settings, f"fdw-foreign-{uuid.uuid4().hex[:8]}", DATA_SCOPES)
    foreign = bearer(await_token(str(api.base_url).rstrip("/"), token))
    for key in moved[kind].values():
        params = {KEY[kind]: key, **WINDOW, "backend": "fdw", "count": "exact"}
        response = api.get(SEARCH[kind], params=params, headers=foreign)
        assert response.status_code == 403, response.text
        report = api.get(
            SEARCH[kind].replace("search", "report"),
            params={KEY[kind]: key, **WINDOW, "backend": "fdw"},
            headers=foreign,
        )
        assert report.status_code == 403, report.text
    params = {**WINDOW, "backend": "fdw", "count": "exact"}
    response = api.get(SEARCH[kind], params=params, headers=foreign)
    assert response.status_code == 200, response.text
    assert response.json()["items"] == [] and response.json()["count"]["value"] == 0


async def test_postgres_fdw_sends_the_owner_and_the_window_to_the_shards(
    api: httpx.Client, metadata: asyncpg.Pool, moved: dict[Kind, dict[str, str]]
) -> None:
    ident = owner_id(api, "audit", moved["audit"]["shared"])
    assert ident is not None
    query = AuditQuery(
        Keys.of(["any"]), Window(DAY, DAY + timedelta(days=1)), (), "substring", "asc"
    )
    sources = sql.Coordinated([], shared_parent("audit"), [ident])
    text, params = sql.fdw_page_sql(query, sources, None, False, 10)

    plan = [row[0] for row in await metadata.fetch(f"EXPLAIN (VERBOSE) {text}", *params)]
    remote = [line for line in plan if "Remote SQL" in line]
    audit_children = [c for c in await children(metadata, [DAY.date()]) if c[0] == "audit"]
    assert len(remote) == len(audit_children) >= 4, plan  # the day's child of every shard
    for line in remote:
        # A custom plan inlines the parameters, a generic one sends them.
        owners = rf"(\$\d+|{re.escape(repr(f'{{{ident}}}'))})"
        assert re.search(rf"owner_id = ANY \({owners}::bigint\[\]\)", line), plan
        assert re.search(r"ts >= (\$\d+|')", line) and re.search(r"ts < (\$\d+|')", line), plan
        assert shared_table("audit", DAY.date()) in line, plan


async def test_retention_detaches_the_children_of_a_shared_day_it_drops(
    api: httpx.Client,
    settings: Settings,
    metadata: asyncpg.Pool,
    world: tuple[CatalogSnapshot, ShardPools],
) -> None:
    """A drop that fails (a reader holds a shared table of one shard) puts its children back;
    the next run drops the day and its children."""
    snapshot, pools = world
    dsns = catalog_shards(api)
    default_keep = settings.ingest.default_keep_days
    day = expired_shared_day(snapshot, default_keep, 31)
    try:
        shards = made_on(snapshot, await make_ahead(metadata, pools, snapshot, [day]))
        expected = {(kind, day, shard) for kind in KINDS for shard in shards}
        assert await children(metadata, [day]) == expected
        held_shard = shards[0]
        holder = await asyncpg.connect(dsns[held_shard])
        try:
            async with holder.transaction():
                await holder.execute(f'LOCK TABLE "{shared_table("audit", day)}" IN SHARE MODE')
                impatient = settings.retention.model_copy(
                    update={"drop_attempts": 1, "lock_timeout_ms": 50}
                )
                runner = RetentionRunner(metadata, pools, impatient, default_keep)
                scope = inventory.Filter(first=day, last=day)
                report = await runner.run(snapshot, RunOptions(trigger="cli", scope=scope))
        finally:
            await holder.close()
        outcomes = {d["shard"]: d["outcome"] for d in report.shared_drops if d["day"] == str(day)}
        assert outcomes[held_shard] == "failed", report.to_json()
        assert all(o == "dropped" for s, o in outcomes.items() if s != held_shard), outcomes
        assert await children(metadata, [day]) == {(kind, day, held_shard) for kind in KINDS}
        assert await foreign_tables(metadata, [day], shards) == len(KINDS)

        runner = RetentionRunner(metadata, pools, settings.retention, default_keep)
        report = await runner.run(
            snapshot, RunOptions(trigger="cli", scope=inventory.Filter(first=day, last=day))
        )
        assert report.status == "done", report.to_json()
        assert await children(metadata, [day]) == set()
        assert await foreign_tables(metadata, [day], shards) == 0
    finally:
        await drop_shared_days(metadata, dsns, [day])


async def test_tables_sync_attaches_a_missing_shared_child(
    api: httpx.Client,
    metadata: asyncpg.Pool,
    world: tuple[CatalogSnapshot, ShardPools],
    ahead: dict[str, Any],
) -> None:
    snapshot, pools = world
    # A shard the ahead job made the day's tables on (a shard another test added may have none).
    shard = min(s for k, _, s in await children(metadata, [DAY.date()]) if k == "flow")
    async with metadata.acquire() as meta, meta.transaction():
        await fdw.detach_shared(meta, "flow", DAY.date(), shard)
    assert ("flow", DAY.date(), shard) not in await children(metadata, [DAY.date()])
    connection = await asyncpg.connect(catalog_shards(api)[shard])
    try:
        known = snapshot.shards[shard]
        await tables.sync(metadata, known, connection, pools.coordinator_login(known.dsn))
    finally:
        await connection.close()
    assert ("flow", DAY.date(), shard) in await children(metadata, [DAY.date()])


async def test_the_router_counts_the_shared_tables_it_makes(
    api: httpx.Client,
    settings: Settings,
    metadata: asyncpg.Pool,
    tmp_path: Path,
    cluster: LocalCluster,
) -> None:
    """shardlog_shared_tables_made_total: the relations the ahead job made (today's three on
    every shard, dropped before it starts, as are tomorrow's should it start past midnight),
    and their children attached."""
    dsns = catalog_shards(api)
    today = clock.today()
    days = [today, today + timedelta(days=1)]  # whichever the job takes, across a midnight
    await drop_shared_days(metadata, dsns, days)
    env = {"SHARDLOG_SHARED__ENABLED": "true", "SHARDLOG_SHARED__DAYS_AHEAD": "0"}
    try:
        with running_router(another_router(settings, tmp_path / "router", env)) as router:

            def made() -> float:
                return scrape(router.url, "shardlog_shared_tables_made_total")

            # At least the session's shards (always up): 3 relations each.
            session = {instance.spec.name for instance in cluster.shards}
            least = 3 * len(session)
            assert await asyncio.to_thread(eventually, lambda: made() >= least, 30.0, 0.2)
            counted = made()
        found = await children(metadata, days)
        made_days = {day for _, day, _ in found}
        assert len(made_days) == 1
        shards = {shard for _, _, shard in found}
        assert session <= shards
        # audit_shared_D, flow_shared_D, owner_days_D on each shard it made them on.
        assert counted == 3 * len(shards)
        assert found == {
            (kind, day, shard) for kind in KINDS for shard in shards for day in made_days
        }
    finally:
        await drop_shared_days(metadata, dsns, days)


REPORTS: dict[Kind, dict[str, Any]] = {
    "audit": {"q": "alpha", "group_by": "owner,bucket", "bucket": "1m"},
    "flow": {"group_by": "switch,dst_port", "metrics": "bytes,packets,rows"},
}


@pytest.mark.parametrize("kind", KINDS)
def test_fdw_reports_equal_fanout_over_every_layout(
    api: httpx.Client, moved: dict[Kind, dict[str, str]], kind: Kind
) -> None:
    path = SEARCH[kind].replace("search", "report")
    for keys in [[key] for key in moved[kind].values()] + [list(moved[kind].values())]:
        params = {KEY[kind]: keys, **WINDOW, **REPORTS[kind]}
        fanout = api.get(path, params={**params, "backend": "fanout"})
        through = api.get(path, params={**params, "backend": "fdw"})
        assert fanout.status_code == through.status_code == 200, through.text
        assert through.json() == fanout.json(), keys
        assert fanout.json()["groups"], keys
