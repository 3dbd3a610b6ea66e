"""Compacting shared days (issue 38, step 5a; docs/architecture.md, "Compacting shared days"):
a closed day of small owners written shared is compacted by `shardlog sharing compact` into
segments of many owners' rows in (ts, owner id, id) order; every search form answers as it did
on the heap: one owner's pages both ways with their cursors, counts with and without a
pattern, permalinks, a prefix's pages over many owners both ways, exports, a report; a cursor
taken on the heap continues on the segments; rows written late into the compacted day are
found beside the segments, before and after the clear. The oracle is the heap's answers, taken
before the compaction, and what the test wrote."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson
import pytest

from bench.shard_view import catalog_shards, owner_id, shard_sql
from router.catalog import store
from router.compaction import shared_sql
from router.compaction.shared import SharedSurvey, survey_shared_days
from router.compaction.shared import shard_day as shared_shard_day
from router.db.names import (
    Reach,
    day_table,
    quote_ident,
    shard_day,
    shared_segment_table,
    shared_table,
)
from router.db.pools import ShardPools
from router.retention import archive, inventory, owner_shared, shared_days
from router.retention.shared_dropper import SharedDropper
from router.search import sql
from router.search.query import AuditQuery, Keys, Window
from router.settings import Settings
from tests.integration.test_compacted_reads import pages
from tests.integration.test_shared_retention import (
    POLICIES,
    group_keep,
    in_catalog,
    plan_of,
    set_policy,
    sharing,
)
from tests.support import (
    another_router,
    cli_env,
    explain_analyze,
    kill_once_waiting,
    locks_held,
    past_day,
    placed_ids,
    post_audit_rows,
    run_cli,
    running_router,
    sharing_client,
    statements_gone,
)

DAY = past_day(10, 0)
WINDOW = {"from": DAY.isoformat(), "to": (DAY + timedelta(days=1)).isoformat()}
RUN = uuid.uuid4().hex[:6]
PREFIX = f"cshared{RUN}-"
OWNERS = {f"{PREFIX}{n}": rows for n, rows in enumerate((40, 33, 5, 1))}
# The owner a longer policy moves out of the compacted day before the day's drop.
MOVED = f"{PREFIX}2"
# The day of a compaction killed inside its copy.
KILL_DAY = past_day(12, 0)
# Small segments: many owners to a segment and many segments to the day.
COMPACT_ENV = {"SHARDLOG_COMPACTION__SEGMENT_ROWS": "16"}


def records(owner: str, rows: int, tag: str, start: int = 0) -> bytes:
    """Rows a minute apart from ``start`` minutes into the day: every owner has rows at the
    same instants as the others (ties broken by owner id, then id)."""
    return b"".join(
        orjson.dumps(
            {
                "owner": owner,
                "ts": (DAY + timedelta(minutes=start + n)).isoformat(),
                "content": f"{tag} {owner} row {n}" + (" needle" if n % 7 == 0 else ""),
                "attrs": {"n": n} if n % 2 else None,
            }
        )
        + b"\n"
        for n in range(rows)
    )


def post(client: httpx.Client, body: bytes) -> None:
    response = client.post(
        "/v1/audit", content=body, headers={"content-type": "application/x-ndjson"}
    )
    assert response.status_code == 200, response.text


def compact(settings: Settings, *extra: str, day: date | None = None) -> dict[str, Any]:
    done = run_cli(
        settings,
        "sharing",
        "compact",
        "--day",
        (day or DAY.date()).isoformat(),
        "--json",
        *extra,
        env=COMPACT_ENV,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    report: dict[str, Any] = json.loads(done.stdout)
    return report


async def _on_shards(dsns: dict[str, str], statements: list[str]) -> list[Any]:
    async def on(dsn: str) -> Any:
        try:
            connection = await asyncpg.connect(dsn, timeout=5)
        except (OSError, asyncpg.PostgresError):
            return None
        try:
            return [await connection.fetchval(statement) for statement in statements]
        finally:
            await connection.close()

    return await asyncio.gather(*(on(dsn) for dsn in dsns.values()))


def shared_rows_left(api: httpx.Client) -> int:
    """The rows of the day's shared tables on every shard, read past the router."""
    name = quote_ident(shared_table("audit", DAY.date()))
    statement = (
        f"SELECT CASE WHEN to_regclass('{name}') IS NULL THEN 0 "
        f"ELSE (xpath('/row/n/text()', query_to_xml('SELECT count(*) AS n FROM {name}', "
        "false, true, '')))[1]::text::bigint END"
    )
    found = asyncio.run(_on_shards(catalog_shards(api), [statement]))
    return sum(answer[0] for answer in found if answer is not None)


@pytest.fixture(scope="module")
def client(
    settings: Settings, tmp_path_factory: pytest.TempPathFactory, api: httpx.Client
) -> Iterator[httpx.Client]:
    env = {"SHARDLOG_SHARED__OWN_TABLE_ROWS": "100000"}
    home = tmp_path_factory.mktemp("compacted-shared")
    with sharing_client(settings, home, api, env) as session:
        yield session


def one_owner_answers(client: httpx.Client, owner: str) -> dict[str, Any]:
    base = {**WINDOW, "owner": owner, "limit": 7}
    return {
        "forward": [p["items"] for p in pages(client, base)],
        "backward": [p["items"] for p in pages(client, {**base, "order": "desc"})],
        "needle": [p["items"] for p in pages(client, {**base, "q": "needle"})],
        "consistent": [p["items"] for p in pages(client, {**base, "consistent": "true"})],
        "fdw": [p["items"] for p in pages(client, {**base, "backend": "fdw"})],
        "count": client.get(
            "/v1/audit/search", params={**base, "count": "exact", "limit": 1}
        ).json()["count"],
        "estimate": client.get(
            "/v1/audit/search", params={**base, "count": "estimate", "limit": 1}
        ).json()["count"],
        "needles": client.get(
            "/v1/audit/search", params={**base, "q": "needle", "count": "exact", "limit": 1}
        ).json()["count"],
    }


def many_owner_answers(client: httpx.Client) -> dict[str, Any]:
    base = {**WINDOW, "owner_prefix": PREFIX, "limit": 9}
    export = client.get("/v1/audit/export", params={**base, "format": "ndjson"})
    assert export.status_code == 200, export.text
    report = client.get(
        "/v1/audit/report", params={**WINDOW, "owner_prefix": PREFIX, "group_by": "owner"}
    )
    assert report.status_code == 200, report.text
    one = client.get("/v1/audit/report", params={**WINDOW, "owner": next(iter(OWNERS))})
    assert one.status_code == 200, one.text
    return {
        "forward": [p["items"] for p in pages(client, base)],
        "backward": [p["items"] for p in pages(client, {**base, "order": "desc"})],
        "needle": [p["items"] for p in pages(client, {**base, "q": "needle"})],
        "count": client.get(
            "/v1/audit/search", params={**base, "count": "exact", "limit": 1}
        ).json()["count"],
        "export": [orjson.loads(line) for line in export.text.splitlines() if line],
        "report": report.json()["groups"],
        "one_owner_report": one.json()["groups"],
    }


def everything(client: httpx.Client) -> dict[str, Any]:
    return {
        "owners": {owner: one_owner_answers(client, owner) for owner in OWNERS},
        "many": many_owner_answers(client),
    }


@pytest.fixture(scope="module")
def written(client: httpx.Client) -> None:
    for owner, rows in OWNERS.items():
        post(client, records(owner, rows, "early"))


def test_a_compacted_shared_day_answers_as_its_heap(
    client: httpx.Client, api: httpx.Client, settings: Settings, written: None
) -> None:
    before = everything(client)
    total = sum(OWNERS.values())
    assert sum(len(p) for p in before["many"]["forward"]) == total
    assert before["many"]["count"]["value"] == total
    first_owner = next(iter(OWNERS))
    # Cursors taken on the heap, one owner's and the prefix's, continued after the compaction.
    held = client.get(
        "/v1/audit/search", params={**WINDOW, "owner": first_owner, "limit": 7}
    ).json()
    held_many = client.get(
        "/v1/audit/search", params={**WINDOW, "owner_prefix": PREFIX, "limit": 9}
    ).json()
    refs = [item["ref"] for item in before["owners"][first_owner]["forward"][0]]

    report = compact(settings)
    days = [d for d in report["shard_days"] if d["rows"]]
    assert days and all(d["steps"] == ["copy", "switch"] for d in days), report
    assert sum(d["rows"] for d in days) == total
    assert all(d["waiting"] for d in days), report
    assert sum(d["segments"] for d in days) >= total // 16, report
    assert shared_rows_left(api) == total  # not cleared yet: the segments answer for them

    assert everything(client) == before
    rest = [
        p["items"]
        for p in pages(client, {**WINDOW, "owner": first_owner, "limit": 7}, held["next_cursor"])
    ]
    assert [held["items"], *rest] == before["owners"][first_owner]["forward"]
    rest_many = [
        p["items"]
        for p in pages(
            client, {**WINDOW, "owner_prefix": PREFIX, "limit": 9}, held_many["next_cursor"]
        )
    ]
    assert [held_many["items"], *rest_many] == before["many"]["forward"]

    # Late rows of a compacted day: in the shared table, read beside the segments.
    post(client, records(first_owner, 3, "late", start=600))
    after_late = everything(client)
    late = after_late["owners"][first_owner]
    assert late["count"]["value"] == OWNERS[first_owner] + 3
    assert [i["content"] for p in late["forward"] for i in p][-3:] == [
        f"late {first_owner} row {n}" + (" needle" if n == 0 else "") for n in range(3)
    ]
    assert after_late["many"]["count"]["value"] == total + 3

    cleared = compact(settings, "--clear-now")
    assert all("clear" in d["steps"] for d in cleared["shard_days"] if d["rows"]), cleared
    # The late rows stay in the shared table, unless they went to a shard whose shard-day had
    # no shared table at the first run: this one compacted it whole.
    copied_now = sum(d["rows"] for d in cleared["shard_days"] if "copy" in d["steps"])
    assert shared_rows_left(api) == 3 - copied_now, cleared
    assert everything(client) == after_late
    for ref in refs:
        answer = client.get(f"/v1/audit/rows/{ref}")
        assert answer.status_code == 200, answer.text
        assert answer.json()["ref"] == ref
    again = compact(settings)
    assert all(d["steps"] == [] and d["state"] != "failed" for d in again["shard_days"]), again


def test_one_owner_s_page_opens_only_its_segments(api: httpx.Client, written: None) -> None:
    """EXPLAIN ANALYZE on the shard: one owner's first page of a compacted shard-day finds its
    segments through the owners index and unpacks those alone (the other owners' segments of
    the shard-day are not opened)."""
    day = DAY.date()
    key = list(OWNERS)[3]  # one row: one segment of its shard-day holds it
    ident = owner_id(api, "audit", key)
    assert ident is not None
    window = Window(DAY, DAY + timedelta(days=1))
    segments_table = shared_segment_table("audit", day)
    for name, dsn in catalog_shards(api).items():
        exists = asyncio.run(
            _on_shards({name: dsn}, [f"SELECT to_regclass('{segments_table}') IS NOT NULL"])
        )[0]
        if not exists or not exists[0]:
            continue
        held = asyncio.run(
            _on_shards(
                {name: dsn},
                [
                    f"SELECT count(*) FROM {segments_table} "
                    f"WHERE owners @> ARRAY[{int(ident)}::bigint]"
                ],
            )
        )[0]
        if not held or not held[0]:
            continue
        table = replace(day_table("audit", ident, day), own=False, shared=True)
        table = replace(table, shared_compacted=True)
        query = AuditQuery(Keys.of(key), window, (), "substring", "asc")
        plan = explain_analyze(dsn, *sql.page_sql(query, [table], name, None, False, 5))
        assert "_owners" in plan, plan  # the GIN index on owners
        unpacks = [line for line in plan.splitlines() if "shardlog_unpack_audit" in line]
        assert unpacks and all("loops=1)" in line for line in unpacks), plan
        assert int(held[0]) == 1  # its one row
        return
    raise AssertionError("no shard holds the owner's segment")


def test_a_prefix_page_opens_the_segments_that_fill_it(api: httpx.Client, written: None) -> None:
    """EXPLAIN ANALYZE on the shard holding most of the day's segments: a first page of a
    prefix (the shard-day branch) reads the segments in order and stops once the page is full:
    at most two unpacks for a page smaller than a segment, whatever the number of segments,
    both ways."""
    day = DAY.date()
    segments_table = shared_segment_table("audit", day)
    counted = {
        name: found[0]
        for name, found in zip(
            catalog_shards(api),
            asyncio.run(
                _on_shards(
                    catalog_shards(api),
                    [
                        f"SELECT CASE WHEN to_regclass('{segments_table}') IS NULL THEN 0 "
                        "ELSE (xpath('/row/n/text()', query_to_xml('SELECT count(*) AS n "
                        f"FROM {segments_table}', false, true, '')))[1]::text::bigint END"
                    ],
                )
            ),
            strict=True,
        )
        if found is not None
    }
    shard = max(counted, key=lambda name: counted[name])
    assert counted[shard] >= 3, counted  # 16-row segments
    # Every row of the day's segments is the prefix's (the test's owners alone wrote it).
    sizes = [
        int(n)
        for n in shard_sql(
            catalog_shards(api)[shard], f"SELECT rows FROM {segments_table} ORDER BY seq"
        ).split()
    ]
    branch = replace(shard_day("audit", day, Reach(None, (), PREFIX, None)), shared_compacted=True)
    window = Window(DAY, DAY + timedelta(days=1))
    for order, descending in (("asc", False), ("desc", True)):
        query = AuditQuery(Keys.of(prefix=PREFIX), window, (), "substring", order)
        plan = explain_analyze(
            catalog_shards(api)[shard], *sql.page_sql(query, [branch], shard, None, descending, 5)
        )
        unpacks = [
            int(line.rsplit("loops=", 1)[1].rstrip(")"))
            for line in plan.splitlines()
            if "shardlog_unpack_audit" in line
        ]
        # The segments that fill the page, and the next one's first row, which tells the
        # incremental sort that the rows of the segments before it are all there.
        in_order = sizes[::-1] if descending else sizes
        filling = next(n for n in range(1, len(sizes) + 1) if sum(in_order[:n]) >= 5)
        assert unpacks and max(unpacks) == min(filling + 1, len(sizes)), (sizes, plan)
        if not descending:
            assert max(unpacks) < len(sizes), (sizes, plan)


def test_an_estimate_of_a_compacted_shared_day_samples_its_segments(
    client: httpx.Client,
    api: httpx.Client,
    settings: Settings,
    tmp_path_factory: pytest.TempPathFactory,
    written: None,
) -> None:
    """count=estimate over compacted shard-days, on a router that opens one candidate segment
    of each table (no count below any size, a sample of one row): the bounds hold the exact
    count, taken by the session's router, and the answer is not exact when a shard-day has
    more than one candidate segment. The session's router, which opens every candidate of
    so few rows, counts exactly (the first test: its answers equal the heap's)."""
    per_shard = asyncio.run(
        _on_shards(
            catalog_shards(api),
            [
                f"SELECT CASE WHEN to_regclass('{shared_segment_table('audit', DAY.date())}') "
                "IS NULL THEN 0 ELSE (xpath('/row/n/text()', query_to_xml('SELECT count(*) AS n "
                f"FROM {shared_segment_table('audit', DAY.date())}', false, true, '')))[1]"
                "::text::bigint END"
            ],
        )
    )
    most = max(answer[0] for answer in per_shard if answer is not None)
    assert most >= 1
    env = {
        "SHARDLOG_SEARCH__ESTIMATE_SEGMENT_COUNT_BELOW_ROWS": "0",
        "SHARDLOG_SEARCH__ESTIMATE_SEGMENT_SAMPLE_ROWS": "1",
        "SHARDLOG_SHARED__OWN_TABLE_ROWS": "100000",
    }
    home = tmp_path_factory.mktemp("compacted-shared-estimate")
    with (
        running_router(another_router(settings, home, env)) as router,
        httpx.Client(base_url=router.url, headers=dict(api.headers)) as sampling,
    ):
        asked = [
            {**WINDOW, "owner_prefix": PREFIX},
            {**WINDOW, "owner_prefix": PREFIX, "q": "needle"},
            {**WINDOW, "owner": next(iter(OWNERS))},
        ]
        for params in asked:
            exact = client.get(
                "/v1/audit/search", params={**params, "count": "exact", "limit": 1}
            ).json()["count"]
            found = sampling.get(
                "/v1/audit/search", params={**params, "count": "estimate", "limit": 1}
            )
            assert found.status_code == 200, found.text
            count = found.json()["count"]
            if count["exact"]:
                assert count == {**exact, "method": "count"}, (params, count)
                continue
            low, high = count["bounds"]
            assert low <= exact["value"] <= high and low <= count["value"] <= high, (params, count)
            assert "segments" in count["method"].split("+"), count
        prefix = sampling.get(
            "/v1/audit/search", params={**asked[0], "count": "estimate", "limit": 1}
        ).json()["count"]
        assert prefix["exact"] is (most == 1), (most, prefix)


def test_a_longer_policy_moves_its_owner_out_of_a_compacted_shared_day(
    client: httpx.Client, api: httpx.Client, settings: Settings, written: None
) -> None:
    """An owner whose own policy keeps its rows longer than its group's, on a compacted shared
    day about to expire for the group: retention's move copies its rows out of the segments
    into a table of its own (ids and contents as they were) and takes them out of the
    segments, in one transaction; every other owner's answers are unchanged."""
    compact(settings, "--clear-now")  # done already when the test before ran: nothing new
    key = MOVED
    window = {**WINDOW, "limit": 1000}
    before = search_items_of(client, {**window, "owner": key})
    others = [
        i for i in search_items_of(client, {**window, "owner_prefix": PREFIX}) if i["owner"] != key
    ]
    ident = owner_id(api, "audit", key)
    assert ident is not None
    group = api.get("/v1/admin/owners", params={"kind": "audit", "key": key}).json()["group"]
    keep = group_keep(api, settings, group)
    set_policy(api, key, group, keep + 30)
    day = DAY.date()
    as_of = day + timedelta(days=keep + 1)

    async def keep_longer(
        metadata: asyncpg.Pool, pools: ShardPools
    ) -> tuple[owner_shared.OwnerSharedReport, bool]:
        snapshot, rules, expired = await plan_of(metadata, pools, settings, as_of, day)
        report = owner_shared.OwnerSharedReport()
        kept = await owner_shared.keep_longer(
            metadata, pools, snapshot, sharing(settings), rules, expired, as_of, report, False
        )
        return report, kept == expired

    try:
        report, unchanged = in_catalog(settings, keep_longer)
    finally:
        policy = next(
            p for p in api.get(POLICIES).json() if (p["kind"], p["owner"]) == ("audit", key)
        )
        assert api.delete(f"{POLICIES}/{policy['id']}").status_code in (200, 204)
    assert [(p["owner"], p["outcome"]) for p in report.promotions] == [(key, "promoted")]
    assert report.held == [] and unchanged  # the day may go whole now
    placed = placed_ids(catalog_shards(api), "audit", ident, day)
    assert (len(placed["shared"]), len(placed["own"])) == (0, OWNERS[key]), placed
    strip = {"ref"}  # a ref names the table the row is read from
    after = search_items_of(client, {**window, "owner": key})
    assert [{k: v for k, v in i.items() if k not in strip} for i in after] == [
        {k: v for k, v in i.items() if k not in strip} for i in before
    ]
    assert [
        i for i in search_items_of(client, {**window, "owner_prefix": PREFIX}) if i["owner"] != key
    ] == others


def test_an_erase_repacks_and_a_drop_archives_a_compacted_shared_day(
    client: httpx.Client, api: httpx.Client, settings: Settings, written: None
) -> None:
    """An erase takes the owner's rows out of the segments that hold them (each rewritten
    without them), no other owner's; the shard-day's drop archives it through its view
    (each owner's rows counted) and takes its segments, view and record with it; a restore
    brings an owner's rows back as they were."""
    compact(settings, "--clear-now")  # done already when the test before ran: nothing new
    keys = list(OWNERS)
    gone, kept = keys[1], keys[0]
    window = {**WINDOW, "limit": 1000}
    kept_before = search_items_of(client, {**window, "owner": kept})
    others_before = [
        i for i in search_items_of(client, {**window, "owner_prefix": PREFIX}) if i["owner"] != gone
    ]
    erased = run_cli(settings, "owner", "erase", gone, "--json")
    assert erased.returncode == 0, erased.stderr
    report = json.loads(erased.stdout)
    assert sum(e["rows"] for e in report["shared_purged"]) == OWNERS[gone], report
    assert report["complete"] and not report["remaining"], report
    assert search_items_of(client, {**window, "owner": gone}) == []
    assert search_items_of(client, {**window, "owner_prefix": PREFIX}) == others_before
    assert search_items_of(client, {**window, "owner": kept}) == kept_before

    ids = {key: owner_id(api, "audit", key) for key in keys}
    day = DAY.date()

    async def drop_archived(metadata: asyncpg.Pool, pools: ShardPools) -> list[Any]:
        snapshot = await store.load_snapshot(metadata)
        scope = inventory.Filter(kind="audit", first=day, last=day)
        found, _ = await shared_days.take(metadata, pools, snapshot, scope)
        dropper = SharedDropper(metadata, pools, settings.retention)
        return [
            await dropper.drop(
                snapshot, shared_days.ExpiredShared(entry, ("audit",), ("audit",), {}, ("audit",))
            )
            for entry in found
        ]

    results = in_catalog(settings, drop_archived)
    assert results and all(r.outcome == "dropped" for r in results), results
    manifests = archive.shared_manifests(Path(settings.retention.archive_dir), "audit", day)
    counted = {key: sum(m.owners.get(str(ids[key]), 0) for m in manifests) for key in keys}
    # Neither the erased owner's rows nor those a longer policy moved to their own table.
    assert counted == {key: 0 if key in (gone, MOVED) else rows for key, rows in OWNERS.items()} | {
        kept: OWNERS[kept] + 3  # its late rows too
    }, counted
    left = asyncio.run(
        _on_shards(
            catalog_shards(api),
            [
                f"SELECT to_regclass('{shared_segment_table('audit', day)}') IS NULL",
                f"SELECT count(*) FROM compacted_days WHERE owner_id = 0 AND day = '{day}'",
            ],
        )
    )
    assert all(answer == [True, 0] for answer in left if answer is not None), left

    restored = run_cli(settings, "restore", kept, day.isoformat(), "--json")
    assert restored.returncode == 0, restored.stderr
    assert json.loads(restored.stdout)["rows"] == OWNERS[kept] + 3
    strip = {"ref"}  # a ref names the table's layout; the rows themselves are as they were
    after = search_items_of(client, {**window, "owner": kept})
    assert [{k: v for k, v in i.items() if k not in strip} for i in after] == [
        {k: v for k, v in i.items() if k not in strip} for i in kept_before
    ]


def search_items_of(client: httpx.Client, params: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for page in pages(client, params) for item in page["items"]]


def test_a_shared_copy_killed_inside_its_transaction_leaves_nothing(
    client: httpx.Client, api: httpx.Client, settings: Settings
) -> None:
    """kill -9 of `shardlog sharing compact` while its copy of a shard-day waits inside its
    transaction (a lock on the shared segment table, held here, keeps its INSERT waiting):
    nothing of the copy stays (no segment, no record, the catalog's layout still the heap's),
    every row is found once, and the next run compacts the day whole."""
    key, day = f"{PREFIX}kill", KILL_DAY.date()
    post_audit_rows(client, key, KILL_DAY + timedelta(hours=1), 40)
    window = {
        "from": KILL_DAY.isoformat(),
        "to": (KILL_DAY + timedelta(days=1)).isoformat(),
        "owner": key,
        "limit": 1000,
    }
    written = search_items_of(client, window)
    assert len(written) == 40
    ident = owner_id(api, "audit", key)
    assert ident is not None
    dsns = catalog_shards(api)
    holding = {
        name: dsns[name]
        for name, found in (
            (name, placed_ids({name: dsn}, "audit", ident, day)) for name, dsn in dsns.items()
        )
        if found["shared"]
    }
    assert holding
    table = shared_shard_day("audit", day)
    segments = table.shared_segments
    for dsn in holding.values():
        shard_sql(dsn, "SET ROLE shardlog_tables; " + "; ".join(shared_sql.table_ddl(table)))
    with locks_held(holding.values(), segments):
        cli = subprocess.Popen(
            [sys.executable, "-m", "router.cli", "sharing", "compact", "--day", day.isoformat()],
            env={
                **cli_env(settings),
                **COMPACT_ENV,
                "SHARDLOG_COMPACTION__LOCK_TIMEOUT_MS": "60000",
            },
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        kill_once_waiting(cli, holding.values(), f"%INSERT INTO {segments}%")
    statements_gone(holding.values(), f"%INSERT INTO {segments}%")

    for dsn in holding.values():
        left = shard_sql(
            dsn,
            f"SELECT (SELECT count(*) FROM {segments}) + (SELECT count(*) FROM compacted_days "
            f"WHERE owner_id = 0 AND day = '{day}')",
        )
        assert left.strip() == "0", left

    async def layouts(metadata: asyncpg.Pool, _pools: ShardPools) -> set[str]:
        rows = await metadata.fetch(
            "SELECT layout FROM shared_tables WHERE kind = 'audit' AND day = $1", day
        )
        return {r["layout"] for r in rows}

    assert in_catalog(settings, layouts) == {"heap"}
    assert search_items_of(client, window) == written

    # Listed by `shardlog compact --dry-run` and the admin API: each to copy.
    listed = listing(settings, day)
    assert {d["shard"]: d["state"] for d in listed if d["shard"] in holding} == {
        shard: "copy" for shard in holding
    }, listed
    # A copy that cannot take its lock fails, and says so until a run takes it further.
    with locks_held(holding.values(), segments):
        failing = run_cli(
            settings,
            "compact",
            "--day",
            day.isoformat(),
            "--kind",
            "audit",
            "--json",
            env={"SHARDLOG_COMPACTION__LOCK_TIMEOUT_MS": "200"},
        )
    assert failing.returncode == 1, failing.stdout + failing.stderr
    failed = [d for d in json.loads(failing.stdout)["shard_days"] if d["shard"] in holding]
    assert failed and all(
        (d["state"], d["failed_step"], d["failures"]) == ("failed", "copy", 1) and d["error"]
        for d in failed
    ), failed
    state = api.get("/v1/admin/compaction", params={"day": day.isoformat(), "failed": "true"})
    assert state.status_code == 200, state.text
    assert {d["shard"] for d in state.json()["shard_days"]} == set(holding), state.json()
    assert (
        api.get("/v1/admin/compaction", params={"day": day.isoformat(), "kind": "flow"}).json()[
            "shard_days"
        ]
        == []
    )

    rerun = compact(settings, "--clear-now", day=day)
    done = [d for d in rerun["shard_days"] if d["rows"]]
    assert sum(d["rows"] for d in done) == 40, rerun
    assert all(d["steps"] == ["copy", "switch", "clear"] for d in done), rerun
    assert in_catalog(settings, layouts) == {"compacted"}
    assert search_items_of(client, window) == written
    after = listing(settings, day)
    assert {d["shard"]: (d["state"], d["failures"]) for d in after if d["shard"] in holding} == {
        shard: ("done", 0) for shard in holding
    }, after


def listing(settings: Settings, day: date) -> list[dict[str, Any]]:
    """The day's shard-days as `shardlog compact --dry-run` lists them, checked against the
    admin API's listing."""
    done = run_cli(settings, "compact", "--dry-run", "--day", day.isoformat(), "--json")
    assert done.returncode == 0, done.stderr
    days: list[dict[str, Any]] = json.loads(done.stdout)["shard_days"]
    return days


def test_a_survey_names_the_shards_it_cannot_read(settings: Settings, written: None) -> None:
    """Shard-days on shards the router has no pool for (the catalog marks them down) are left
    out of the listing, each such shard named with why, rather than failing it."""

    async def survey(metadata: asyncpg.Pool, _pools: ShardPools) -> SharedSurvey:
        without = ShardPools(settings.pools)  # no shard reconciled: no pool for any
        try:
            day = KILL_DAY.date()  # the days of the first tests are dropped by now
            return await survey_shared_days(metadata, without, settings.compaction, day)
        finally:
            await without.close()

    found = in_catalog(settings, survey)
    assert found.days == [] and found.unreachable, found
    assert all("no connection pool" in why for why in found.unreachable.values()), found
