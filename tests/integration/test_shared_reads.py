"""Readers of both layouts (issue 38, step 2; docs/architecture.md, "Reading both layouts"): an
owner-day's rows on a shard may be in its own day table, in the shard's shared table of the day,
or in both, and every reader answers as if they were in one table.

The oracle is the answers before the move: owners and switches write a past day through the
REST API (own day tables), every search form, page by page both ways, its counts, exports,
reports and refs are recorded; then, on every shard, the test moves rows into the shared tables
with their ids (as a promotion moves them the other way, as the writer role would): all of one
owner's rows (its own tables then dropped as retention drops them), half of another's (an
owner-day in both places), half of a third's before its own tables are compacted (own segments
and shared rows), none of a fourth's. Every answer must be the same, and the cursors taken
before the move must continue after it."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import date, timedelta
from typing import Any

import asyncpg
import httpx
import orjson
import pytest

from bench.shard_view import catalog_shards, day_tables, owner_id, shard_sql
from router.catalog import mirror, store
from router.db import catalog_login
from router.db.names import (
    DayTable,
    Kind,
    day_table,
    owner_days_table,
    parse_day_table,
)
from router.db.pools import ShardPools
from router.retention.dropper import forget
from router.search import sql
from router.search.query import AuditQuery, Keys, Window
from router.settings import Settings
from router.sharing.ahead import make_ahead
from tests.integration import test_compacted_flows as compacted_flows
from tests.integration import test_compacted_reads as compacted_reads
from tests.integration.test_compacted_reads import answer, answers_alike, cursors_continue, pages
from tests.integration.test_search import post
from tests.support import drop_shared_days, past_day, placed_ids, run_cli

DAY = past_day(5, 0)
WINDOW = {"from": DAY.isoformat(), "to": (DAY + timedelta(days=1)).isoformat()}
SEARCH = {"audit": "/v1/audit/search", "flow": "/v1/flows/search"}
ROWS = {"audit": "/v1/audit/rows", "flow": "/v1/flows/rows"}
KEY = {"audit": "owner", "flow": "switch"}
# How much of an owner's rows move into the shared tables, by its role in the test.
MOVED = {"own": "none", "mixed": "half", "shared": "all", "packed": "half"}
AUDIT_ROLES = ("own", "mixed", "shared", "packed")
FLOW_ROLES = ("own", "mixed", "shared")

AUDIT_COLUMNS = "id, ts, content, attrs, created_xid"
FLOW_COLUMNS = (
    "id, src_ip, dst_ip, src_port, dst_port, ip_version, proto, bytes, packets, flow_count, "
    "first_seen, last_seen, created_xid, merged_xid, tcp_flags, sampling_rate, sampled, "
    "sampling_mixed"
)


def rows_of(owner: str, rng: random.Random) -> list[dict[str, Any]]:
    rows = compacted_reads.rows_of(owner, rng)
    day = DAY.date().isoformat()
    for row in rows:
        row["ts"] = day + row["ts"][10:]
    return rows


def audit_forms(owners: list[str], prefix: str) -> list[dict[str, Any]]:
    forms = compacted_reads.forms(owners, window=WINDOW)
    by_prefix = compacted_reads.forms([], [{}, {"q": "alpha"}], window=WINDOW)
    return forms + [
        {**{k: v for k, v in f.items() if k != "owner"}, "owner_prefix": prefix} for f in by_prefix
    ]


def flow_forms(switches: list[str]) -> list[dict[str, Any]]:
    return compacted_reads.forms(switches, compacted_flows.FORMS, "switch", WINDOW)


def flow_records(switch: str, rng: random.Random) -> list[dict[str, Any]]:
    flows = compacted_flows.flows_of(switch, rng)
    for flow in flows:
        flow.first_seen = flow.last_seen = DAY + (flow.first_seen - compacted_flows.DAY)
    records = [flow.record(flow.first_seen, rng.randrange(40, 4000)) for flow in flows]
    records += [flow.record(flow.first_seen + timedelta(minutes=5), 100) for flow in flows[::3]]
    return records


def recorded(api: httpx.Client, kind: Kind, forms: list[dict[str, Any]]) -> dict[str, Any]:
    path = SEARCH[kind]
    keys = forms[0][KEY[kind]]
    return {
        "forms": {orjson.dumps(p): answer(pages(api, p, path=path)) for p in forms},
        "first_pages": {orjson.dumps(p): api.get(path, params=p).json() for p in forms},
        "export": {
            f: compacted_reads.export(api, keys, f, path.replace("search", "export"))
            for f in ("ndjson", "csv")
        },
        "report": compacted_reads.report(api, keys)
        if kind == "audit"
        else compacted_flows.report(api, keys),
    }


def counted(api: httpx.Client, kind: Kind, keys: list[str], count: str) -> dict[str, Any]:
    """The count of a filter over ``keys``."""
    extra = {"q": "alpha"} if kind == "audit" else {"dst_port": "443"}
    params: dict[str, Any] = {KEY[kind]: keys, **WINDOW, **extra, "limit": 1, "count": count}
    response = api.get(SEARCH[kind], params=params)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()["count"]
    return found


async def move_rows(
    dsn: str, table: DayTable, share: str, metadata: asyncpg.Pool, shard: str
) -> int:
    """Rows of ``table`` into its shard's shared table of the day with their ids: ``share``
    "half" (about half, by a hash of the id) or "all" (then the day table is forgotten and
    dropped, as retention drops one). The rows moved."""
    columns = AUDIT_COLUMNS if table.kind == "audit" else FLOW_COLUMNS
    which = "hashtext(id::text) % 2 = 0" if share == "half" else "true"
    connection = await asyncpg.connect(dsn)
    try:
        async with connection.transaction():
            moved = await connection.fetchval(
                f"WITH moved AS (DELETE FROM {table.quoted} WHERE {which} RETURNING {columns}), "
                f"copied AS (INSERT INTO {table.shared_quoted} (owner_id, {columns}) "
                f"SELECT {table.owner_id}, {columns} FROM moved RETURNING 1) "
                "SELECT count(*) FROM copied"
            )
            await connection.execute(
                f'INSERT INTO "{owner_days_table(table.day)}" (kind, owner_id) VALUES ($1, $2) '
                "ON CONFLICT DO NOTHING",
                table.kind,
                table.owner_id,
            )
            # As a shared write does: the owner in the shard's mirror with its first row.
            mapping = await store.owners_by_id(metadata, table.kind, [table.owner_id])
            await mirror.write_mirror(connection, mapping.values())
        await metadata.execute(
            "INSERT INTO owner_shards (kind, owner_id, shard, since) VALUES ($1, $2, $3, $4) "
            "ON CONFLICT DO NOTHING",
            table.kind,
            table.owner_id,
            shard,
            table.day,
        )
        if share == "all":
            await forget(metadata, table, shard)
            await connection.execute(f"DROP TABLE {table.quoted}")
        return int(moved)
    finally:
        await connection.close()


async def tables_of(metadata: asyncpg.Pool, kind: Kind, ident: int, day: date) -> list[Any]:
    return list(
        await metadata.fetch(
            "SELECT shard FROM day_tables WHERE kind = $1 AND owner_id = $2 AND day = $3",
            kind,
            ident,
            day,
        )
    )


@pytest.fixture(scope="module")
async def metadata(api: httpx.Client, settings: Settings) -> AsyncIterator[asyncpg.Pool]:
    pool = await catalog_login.open_pool(settings)
    yield pool
    await pool.close()


@pytest.fixture(scope="module")
async def shared_day(
    api: httpx.Client, settings: Settings, metadata: asyncpg.Pool
) -> AsyncIterator[date]:
    """The shared tables of DAY on every shard, made by the router's ahead job; dropped with
    their registry rows, coordinator children and the owners' owner_shards rows afterwards."""
    snapshot = await store.load_snapshot(metadata)
    pools = ShardPools(settings.pools)
    await pools.reconcile(snapshot)
    try:
        report = await make_ahead(metadata, pools, snapshot, [DAY.date()])
        assert not report.unreachable, report.unreachable
    finally:
        await pools.close()
    yield DAY.date()
    await drop_shared_days(metadata, catalog_shards(api), [DAY.date()])
    await metadata.execute("DELETE FROM owner_shards WHERE since = $1", DAY.date())


@pytest.fixture(scope="module")
async def moved(
    api: httpx.Client, settings: Settings, metadata: asyncpg.Pool, shared_day: date
) -> dict[str, Any]:
    """The answers with every row in its own tables, then the rows moved by role."""
    tag = uuid.uuid4().hex[:8]
    owners = {role: f"both-{tag}-{role}" for role in AUDIT_ROLES}
    switches = {role: f"both-flows-{tag}-{role}" for role in FLOW_ROLES}
    rng = random.Random(38)
    for owner in owners.values():
        rows = rows_of(owner, rng)
        for start in range(0, len(rows), 20):  # several requests: several shards
            post(api, "/v1/audit", rows[start : start + 20])  # type: ignore[no-untyped-call]
    for switch in switches.values():
        records = flow_records(switch, rng)
        for start in range(0, len(records), 25):
            compacted_flows.post(api, records[start : start + 25])
    before = {
        "audit": recorded(api, "audit", audit_forms(list(owners.values()), f"both-{tag}-")),
        "flow": recorded(api, "flow", flow_forms(list(switches.values()))),
    }
    dsns = catalog_shards(api)
    counts: dict[str, int] = {}
    kinds: tuple[tuple[Kind, dict[str, str]], ...] = (("audit", owners), ("flow", switches))
    for kind, keys in kinds:
        for role, key in keys.items():
            ident = owner_id(api, kind, key)
            assert ident is not None
            shards = [r["shard"] for r in await tables_of(metadata, kind, ident, DAY.date())]
            assert len(shards) >= 2, (key, shards)  # the spread: several shards per owner-day
            counts[key] = 0
            if MOVED[role] == "none":
                continue
            for shard in shards:
                table = day_table(kind, ident, DAY.date())
                counts[key] += await move_rows(dsns[shard], table, MOVED[role], metadata, shard)
            assert counts[key] > 0
    compacted_reads.compact(settings, owners["packed"])
    return {"owners": owners, "switches": switches, "before": before, "moved": counts}


def test_rows_are_in_both_layouts(api: httpx.Client, moved: dict[str, Any]) -> None:
    """The test's premise: the shared tables hold the moved rows, the own tables the rest."""
    dsns = catalog_shards(api)
    kinds: tuple[tuple[Kind, dict[str, str], int], ...] = (
        ("audit", moved["owners"], compacted_reads.ROWS_PER_OWNER),
        ("flow", moved["switches"], compacted_flows.FLOWS_PER_SWITCH),
    )
    for kind, keys, total in kinds:
        for role, key in keys.items():
            ident = owner_id(api, kind, key)
            assert ident is not None
            shared = len(placed_ids(dsns, kind, ident, DAY.date())["shared"])
            assert shared == moved["moved"][key], (kind, role)
            expected = {"none": 0, "all": total}.get(MOVED[role])
            if expected is not None:
                assert shared == expected, (kind, role)
            else:
                assert 0 < shared < total, (kind, role)


@pytest.mark.parametrize("kind", ["audit", "flow"])
def test_every_search_form_answers_as_from_own_tables(
    api: httpx.Client, moved: dict[str, Any], kind: Kind
) -> None:
    answers_alike(api, moved["before"][kind], SEARCH[kind])


@pytest.mark.parametrize("kind", ["audit", "flow"])
def test_cursors_taken_before_the_move_continue(
    api: httpx.Client, moved: dict[str, Any], kind: Kind
) -> None:
    cursors_continue(api, moved["before"][kind], SEARCH[kind])


@pytest.mark.parametrize("kind", ["audit", "flow"])
def test_refs_issued_before_the_move_resolve(
    api: httpx.Client, moved: dict[str, Any], kind: Kind
) -> None:
    before = moved["before"][kind]
    key = next(k for k in before["forms"] if orjson.loads(k)["limit"] == 1000)
    items = [item for page in before["forms"][key] for item in page[0]]
    assert items
    for item in items:
        response = api.get(f"{ROWS[kind]}/{item['ref']}")
        assert response.status_code == 200, response.text
        assert response.json() == item


@pytest.mark.parametrize("kind", ["audit", "flow"])
def test_exports_reports_and_counts_read_both_layouts(
    api: httpx.Client, moved: dict[str, Any], kind: Kind
) -> None:
    before = moved["before"][kind]
    keys = list((moved["owners"] if kind == "audit" else moved["switches"]).values())
    path = SEARCH[kind].replace("search", "export")
    for format, body in before["export"].items():
        assert compacted_reads.export(api, keys, format, path) == body, format
    report = (
        compacted_reads.report(api, keys) if kind == "audit" else compacted_flows.report(api, keys)
    )
    assert report == before["report"]
    # The rows in shared tables are counted, not sampled: an owner-day stays shared up to
    # SHARDLOG_SHARED__OWN_TABLE_ROWS rows. The own tables are estimated as before.
    only_shared = [(moved["owners"] if kind == "audit" else moved["switches"])["shared"]]
    exact = counted(api, kind, only_shared, "exact")
    assert exact["value"] > 0
    assert counted(api, kind, only_shared, "estimate") == exact
    assert counted(api, kind, keys, "estimate")["value"] >= exact["value"]


def test_each_owner_alone_reads_both_layouts(api: httpx.Client, moved: dict[str, Any]) -> None:
    """One owner per search, whatever its layout: its page, exact count and estimate."""
    for key in moved["owners"].values():
        params = {"owner": key, **WINDOW, "limit": 1000}
        items = [i for page in pages(api, params) for i in page["items"]]
        assert len(items) == compacted_reads.ROWS_PER_OWNER, key
        assert len({(i["shard"], i["id"]) for i in items}) == len(items), key
        assert [i["ts"] for i in items] == sorted(i["ts"] for i in items), key
        for count in ("exact", "estimate"):
            found = api.get(
                "/v1/audit/search", params={**params, "limit": 1, "count": count}
            ).json()["count"]
            assert found["value"] == len(items), (key, count, found)


def test_a_page_reads_the_shared_table_through_the_owners_index(
    api: httpx.Client, moved: dict[str, Any]
) -> None:
    """The plan the design counts on: the shared branch of an owner-day in both places reads
    the owner's rows alone, in order, through (owner_id, ts, id), and a page merges the two
    branches and stops when it is full; among 60,000 rows of another owner on the same day."""
    ident = owner_id(api, "audit", moved["owners"]["mixed"])
    assert ident is not None
    shard, tables = next(iter(day_tables(api, "audit", ident).items()))
    dsn = catalog_shards(api)[shard]
    own = parse_day_table(tables[0])
    assert own is not None
    table = replace(own, shared=True)
    stranger = 10**12 + 38
    shard_sql(
        dsn,
        f"INSERT INTO {table.shared_quoted} (owner_id, ts, content) SELECT {stranger}, "
        f"TIMESTAMPTZ '{DAY.isoformat()}' + n * INTERVAL '1 s', 'line ' || n "
        f"FROM generate_series(1, 60000) AS n; ANALYZE {table.shared_quoted}",
    )
    try:
        for descending in (False, True):
            query = AuditQuery(
                Keys.of(["any"]), Window(DAY, DAY + timedelta(days=1)), (), "substring", "asc"
            )
            text, params = sql.page_sql(query, [table], shard, None, descending, 5)
            plan = asyncio.run(compacted_reads.explain(dsn, text, params))
            nodes = list(compacted_reads.walk(plan[0]["Plan"]))
            shared = [n for n in nodes if n.get("Relation Name") == table.shared_name]
            assert shared and all(n["Node Type"].startswith("Index") for n in shared), plan
            assert all(n["Index Name"].endswith("owner_ts_id") for n in shared), plan
            assert sum(n["Actual Rows"] for n in shared) <= 5, plan
    finally:
        shard_sql(dsn, f"DELETE FROM {table.shared_quoted} WHERE owner_id = {stranger}")


def test_the_owner_export_reads_both_layouts(
    api: httpx.Client, settings: Settings, moved: dict[str, Any]
) -> None:
    """`shardlog owner export` (the per-owner lifecycle) of an owner in each layout: its rows
    as the search lists them."""
    day = DAY.date().isoformat()
    for key in moved["owners"].values():
        exported = run_cli(settings, "owner", "export", key, "--from", day, "--to", day)
        assert exported.returncode == 0, exported.stderr
        rows = [orjson.loads(line) for line in exported.stdout.splitlines()]
        listed = [
            i for page in pages(api, {"owner": key, **WINDOW, "limit": 1000}) for i in page["items"]
        ]
        assert len(rows) == compacted_reads.ROWS_PER_OWNER, key
        assert [(r["shard"], r["id"], r["content"]) for r in rows] == [
            (i["shard"], i["id"], i["content"]) for i in listed
        ], key


async def test_a_shared_table_gone_since_the_plan_is_left_out(
    api: httpx.Client, metadata: asyncpg.Pool, moved: dict[str, Any]
) -> None:
    """Retention dropped a shard-day's shared table after the search planned it (its registry
    row is still there): the search reads the rest, and the owners' own tables stay in the
    catalog."""
    key = moved["owners"]["mixed"]
    ident = owner_id(api, "audit", key)
    shard = await metadata.fetchval(
        "SELECT shard FROM owner_shards WHERE kind = 'audit' AND owner_id = $1 LIMIT 1", ident
    )
    gone = DAY.date() + timedelta(days=1)
    await metadata.execute(
        "INSERT INTO shared_tables (kind, day, shard) VALUES ('audit', $1, $2)", gone, shard
    )
    try:
        own_before = await tables_of(metadata, "audit", ident, DAY.date())
        window = {"from": WINDOW["from"], "to": (DAY + timedelta(days=2)).isoformat()}
        params = {"owner": key, **window, "limit": 1000, "count": "exact"}
        response = await asyncio.to_thread(api.get, "/v1/audit/search", params=params)
        assert response.status_code == 200, response.text
        page = response.json()
        assert len(page["items"]) == page["count"]["value"] == compacted_reads.ROWS_PER_OWNER
        assert await tables_of(metadata, "audit", ident, DAY.date()) == own_before
    finally:
        await metadata.execute(
            "DELETE FROM shared_tables WHERE kind = 'audit' AND day = $1 AND shard = $2",
            gone,
            shard,
        )
