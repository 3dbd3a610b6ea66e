"""Searches of a prefix or of no owner over many small owners (issue 38, step 2;
docs/architecture.md, "Reading both layouts", "Pages", "The reach is checked twice"): the
shared rows of owners the search does not name are read by one branch per shard-day, held to
the token's reach by the shard's mirror of the owners (``shard_owners``) and checked again by
the router against the catalog. Only owners with own day tables count against
SHARDLOG_SEARCH__MAX_MATCHED_OWNERS.

Two tenants write small owners (a few rows each, shared) and one big owner each (its own
tables), with adversarial keys: another tenant's key that extends this tenant's prefix, one
equal to the prefix searched, keys holding ``%`` and ``_``. The oracle is what each tenant
wrote, sorted as the API sorts (ts, then where the row is: compared as sets per ts)."""

from __future__ import annotations

import asyncio
import csv
import io
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import httpx
import orjson
import pytest

from bench.shard_view import catalog_shards, owner_id, shard_sql
from router.auth.scopes import AUDIT_READ, AUDIT_WRITE, REPORTS, TAIL
from router.csv_cells import csv_cell
from router.db.names import DayTable, Reach, day_table, shard_day
from router.search import freshness, sql
from router.search.query import AuditQuery, Keys, Window
from router.settings import Settings
from tests.integration.test_compacted_reads import pages
from tests.support import (
    await_token,
    bearer,
    explain_analyze,
    issue_token,
    past_day,
    placed_counts,
    post_audit_rows,
    sharing_client,
)
from tests.tail_client import TailClient

OWN_TABLE_ROWS = 20
MOST_OWNERS = 2
DAY = past_day(4, 0)
WINDOW = {"from": DAY.isoformat(), "to": (DAY + timedelta(days=1)).isoformat()}
RUN = uuid.uuid4().hex[:6]
SCOPES = [AUDIT_READ, AUDIT_WRITE, REPORTS, TAIL]
BASE = f"many{RUN}-"
PREFIX = f"{BASE}a"
# A key a spreadsheet would take for a formula, with a quote and a comma: CSV cells quote it.
FORMULA_KEY = f'=many{RUN}-"f",1'


def tenant_keys() -> dict[str, list[str]]:
    """Each tenant's owners: small ones, one big one (own tables), adversarial keys."""
    ours = [f"{PREFIX}{n}" for n in range(12)] + [f"{PREFIX}%x", f"{PREFIX}_y", f"{PREFIX}big"]
    theirs = [f"{PREFIX}1x", PREFIX, f"{BASE}b1", f"{BASE}a%", f"{BASE}bbig", FORMULA_KEY]
    return {"ours": ours, "theirs": theirs}


def rows_of(key: str, index: int) -> int:
    return 30 if key.endswith("big") else 1 + index % 4


@pytest.fixture(scope="module")
def many(
    settings: Settings, tmp_path_factory: pytest.TempPathFactory, api: httpx.Client
) -> Iterator[dict[str, Any]]:
    env = {
        "SHARDLOG_SHARED__OWN_TABLE_ROWS": str(OWN_TABLE_ROWS),
        "SHARDLOG_SEARCH__MAX_MATCHED_OWNERS": str(MOST_OWNERS),
        "SHARDLOG_REPORT__MAX_MATCHED_KEYS": str(MOST_OWNERS),
    }
    home = tmp_path_factory.mktemp("many-router")
    with sharing_client(settings, home, api, env) as admin:
        url = str(admin.base_url).rstrip("/")
        tokens = {
            side: await_token(
                url,
                issue_token(
                    settings, f"many-{side}-{RUN}", [AUDIT_READ, AUDIT_WRITE, REPORTS, TAIL]
                ),
            )
            for side in ("ours", "theirs")
        }
        clients = {
            side: httpx.Client(base_url=url, headers=bearer(token), timeout=60)
            for side, token in tokens.items()
        }
        written: dict[str, list[tuple[str, str]]] = {}
        for side, keys in tenant_keys().items():
            written[side] = []
            for index, key in enumerate(keys):
                at = DAY + timedelta(hours=1 + index % 5, minutes=index)
                post_audit_rows(clients[side], key, at, rows_of(key, index), f"{side} {key}")
                written[side] += [
                    ((at + timedelta(seconds=n)).isoformat(), key)
                    for n in range(rows_of(key, index))
                ]
        narrow = issue_token(settings, f"many-ours-{RUN}", [AUDIT_READ, f"owner:{PREFIX}1"])
        clients["narrow"] = httpx.Client(
            base_url=url, headers=bearer(await_token(url, narrow)), timeout=60
        )
        try:
            yield {"admin": admin, "clients": clients, "written": written, "tokens": tokens}
        finally:
            for client in clients.values():
                client.close()


def on_shards(dsns: dict[str, str], statement: str) -> set[str]:
    """The shards where ``statement`` returned a row; shards another test stopped are
    skipped."""

    async def on(dsn: str) -> bool:
        try:
            connection = await asyncpg.connect(dsn, timeout=5)
        except (OSError, asyncpg.PostgresError):
            return False
        try:
            return bool(await connection.fetch(statement))
        finally:
            await connection.close()

    async def everywhere() -> list[bool]:
        return await asyncio.gather(*(on(dsn) for dsn in dsns.values()))

    return {name for name, hit in zip(dsns, asyncio.run(everywhere()), strict=True) if hit}


def found(client: httpx.Client, params: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for page in pages(client, params) for item in page["items"]]


def as_written(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(datetime.fromisoformat(i["ts"]).isoformat(), i["owner"]) for i in items]


def expected(many: dict[str, Any], side: str, keep: Any = lambda _key: True) -> list[Any]:
    return sorted(row for row in many["written"][side] if keep(row[1]))


def test_the_owners_land_as_planned(many, api) -> None:
    """The oracle's premise: the small owners' rows are shared, the big ones' own."""
    for side, keys in tenant_keys().items():
        for key in keys:
            ident = owner_id(api, "audit", key)
            assert ident is not None, key
            shared, own = placed_counts(api, ident, DAY)
            if key.endswith("big"):
                assert (shared, own) == (0, 30), key
            else:
                assert own == 0 and shared >= 1, (side, key)


@pytest.mark.parametrize("order", ["asc", "desc"])
@pytest.mark.parametrize("limit", [3, 1000])
def test_no_owner_pages_past_the_cap_hold_exactly_the_tenants_rows(many, order, limit) -> None:
    """More owners than SHARDLOG_SEARCH__MAX_MATCHED_OWNERS hold rows: the search still pages
    (only the big owner counts against it), every row of the tenant once, no other's."""
    for side in ("ours", "theirs"):
        params = {**WINDOW, "order": order, "limit": limit, "count": "exact"}
        items = found(many["clients"][side], params)
        got = as_written(items)
        assert sorted(got) == expected(many, side), side
        stamps = [item["ts"] for item in items]
        assert stamps == sorted(stamps, reverse=order == "desc")
        first = many["clients"][side].get("/v1/audit/search", params=params).json()
        assert first["count"]["value"] == len(got)
        assert all(item["content"] == f"{side} {item['owner']}" for item in items)


def test_a_prefix_is_data_and_stays_in_the_tenant(many) -> None:
    """A prefix holding '%' or '_' matches those characters only; another tenant's keys that
    extend the prefix, or equal it, are not found."""
    ours = many["clients"]["ours"]
    for prefix in (PREFIX, f"{PREFIX}1", f"{PREFIX}%", f"{PREFIX}_", BASE):
        items = found(ours, {**WINDOW, "owner_prefix": prefix, "limit": 4})
        assert sorted(as_written(items)) == expected(
            many, "ours", lambda key, prefix=prefix: key.startswith(prefix)
        ), prefix


def test_a_token_s_prefixes_bound_the_shard_day_rows(many) -> None:
    items = found(many["clients"]["narrow"], {**WINDOW, "limit": 5})
    assert sorted(as_written(items)) == expected(
        many, "ours", lambda key: key.startswith(f"{PREFIX}1")
    )


def test_listed_owners_beside_a_prefix_are_read_once(many) -> None:
    """Owners named beside a prefix that also covers some of them: each row once."""
    listed = [f"{PREFIX}3", f"{PREFIX}10", f"{PREFIX}big"]
    params = {**WINDOW, "owner": listed, "owner_prefix": f"{PREFIX}1", "limit": 4}
    items = found(many["clients"]["ours"], params)
    assert sorted(as_written(items)) == expected(
        many, "ours", lambda key: key in listed or key.startswith(f"{PREFIX}1")
    )


def test_pages_back_and_consistent_pages_match(many) -> None:
    client = many["clients"]["ours"]
    params = {**WINDOW, "limit": 4}
    forward = pages(client, params)
    back, cursor = [forward[-1]["items"]], forward[-1]["prev_cursor"]
    while cursor:
        page = client.get("/v1/audit/search", params={**params, "cursor": cursor}).json()
        back.insert(0, page["items"])
        cursor = page["prev_cursor"]
    items = [item for page in forward for item in page["items"]]
    assert [item for page in back for item in page] == items
    consistent = found(client, {**params, "consistent": "true"})
    assert consistent == items


def test_owners_with_own_tables_still_count_against_the_cap(many) -> None:
    """Owners with own tables in the window are still covered by name: two more big owners of
    the tenant make three, one more than MOST_OWNERS; a prefix that leaves one out pages."""
    ours = many["clients"]["ours"]
    for n in range(2):
        big, at = f"{BASE}c{n}big", DAY + timedelta(hours=6 + n)
        post_audit_rows(ours, big, at, 30, f"ours {big}")
        many["written"]["ours"] += [
            ((at + timedelta(seconds=s)).isoformat(), big) for s in range(30)
        ]
    answer = ours.get("/v1/audit/search", params={**WINDOW, "owner_prefix": BASE})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["field"] == "owner_prefix"
    assert "SHARDLOG_SEARCH__MAX_MATCHED_OWNERS" in answer.json()["error"]["message"]
    items = found(ours, {**WINDOW, "owner_prefix": PREFIX, "limit": 7})
    assert sorted(as_written(items)) == expected(many, "ours", lambda k: k.startswith(PREFIX))


def test_a_stale_mirror_fails_the_page_and_is_repaired(many, api) -> None:
    """Another tenant's owner that a shard's mirror says is ours (a remap it missed): the page
    that would hold its rows is a 503 naming no key of theirs, the mirror is repaired, and the
    next search answers without them."""
    ours = many["clients"]["ours"]
    foreign = f"{PREFIX}1x"
    ident = owner_id(api, "audit", foreign)
    assert ident is not None
    dsns = catalog_shards(api)
    shards = on_shards(
        dsns,
        f"UPDATE shard_owners SET tenant = 'many-ours-{RUN}' "
        f"WHERE kind = 'audit' AND owner_id = {ident} RETURNING 1",
    )
    assert shards
    answer = ours.get("/v1/audit/search", params={**WINDOW, "owner_prefix": PREFIX})
    assert answer.status_code == 503, answer.text
    assert foreign not in answer.text and "theirs" not in answer.text
    assert "mirror" in answer.json()["error"]["message"]
    assert answer.headers.get("retry-after") == "1"
    for shard in shards:
        tenant = shard_sql(
            dsns[shard],
            f"SELECT tenant FROM shard_owners WHERE kind = 'audit' AND owner_id = {ident}",
        )
        assert tenant.strip() == f"many-theirs-{RUN}"
    items = found(ours, {**WINDOW, "owner_prefix": PREFIX, "limit": 50})
    assert sorted(as_written(items)) == expected(many, "ours", lambda k: k.startswith(PREFIX))


def test_a_promotion_after_the_plan_is_found_and_read(many, api) -> None:
    """A shard-day branch planned before an owner's promotion: the read finds the owner-day
    promoted (its rows gone from the shared table) and reads its own table too
    (router/search/freshness.py). The test promotes one small owner by hand as the promotion
    would: own table, rows moved, owner_days marked."""
    key = f"{PREFIX}2"
    ident = owner_id(api, "audit", key)
    assert ident is not None
    shard = next(
        iter({i["shard"] for i in found(many["clients"]["ours"], {**WINDOW, "owner": key})})
    )
    dsn = catalog_shards(api)[shard]
    own = day_table("audit", ident, DAY.date())
    reach = Reach(f"many-ours-{RUN}", (), PREFIX, "shardlog.")
    branch = shard_day("audit", DAY.date(), reach)

    async def check() -> set[Any]:
        connection = await asyncpg.connect(dsn)
        try:
            assert await freshness.promoted(connection, [branch], 10) == set()
            async with connection.transaction():
                await connection.execute(
                    f"CREATE TABLE {own.quoted} (LIKE {branch.shared_quoted} INCLUDING DEFAULTS)"
                )
                await connection.execute(
                    f"UPDATE owner_days_{DAY:%Y%m%d} SET promoted = true "
                    f"WHERE kind = 'audit' AND owner_id = {ident}"
                )
            try:
                moved = await freshness.promoted(connection, [branch], 10)
                planned = await freshness.promoted(
                    connection, [branch, DayTable("audit", ident, DAY.date())], 10
                )
                assert planned == set()
                return moved
            finally:
                async with connection.transaction():
                    await connection.execute(f"DROP TABLE {own.quoted}")
                    await connection.execute(
                        f"UPDATE owner_days_{DAY:%Y%m%d} SET promoted = false "
                        f"WHERE kind = 'audit' AND owner_id = {ident}"
                    )
        finally:
            await connection.close()

    assert asyncio.run(check()) == {("audit", ident, DAY.date())}
    tables = freshness.with_own_tables([branch], {("audit", ident, DAY.date())})
    assert [(t.owner_id, t.own, t.shared) for t in tables] == [
        (0, False, True),
        (ident, True, False),
    ]


def explained(dsn: str, reach: Reach) -> str:
    """EXPLAIN ANALYZE of a first page of the run's day through one shard-day branch."""
    query = AuditQuery(Keys.of(), Window(DAY, DAY + timedelta(days=1)), (), "substring", "asc")
    text, params = sql.page_sql(query, [shard_day("audit", DAY.date(), reach)], "x", None, False, 5)
    return explain_analyze(dsn, text, params)


def test_a_shard_day_page_reads_an_index_and_skips_a_shard_without_the_tenant(many, api) -> None:
    """The branch reads the shared table through an index (the planner's choice: the time
    index under the page's LIMIT, or each mirrored owner's index when the tenant's owners on
    the shard are few, as here); on a shard whose mirror holds no owner of the tenant, it is
    never executed."""
    key = f"{PREFIX}0"
    shard = found(many["clients"]["ours"], {**WINDOW, "owner": key})[0]["shard"]
    dsn = catalog_shards(api)[shard]
    ours = explained(dsn, Reach(f"many-ours-{RUN}", (), None, "shardlog."))
    assert f"Index Scan using audit_shared_{DAY:%Y%m%d}_" in ours, ours
    assert "Seq Scan" not in ours and " rows=0 " not in ours.splitlines()[0], ours
    nobody = explained(dsn, Reach(f"many-nobody-{RUN}", (), None, "shardlog."))
    assert "One-Time Filter" in nobody and "never executed" in nobody, nobody


def metadata_sql(settings: Settings, statement: str) -> list[Any]:
    async def run() -> list[Any]:
        connection = await asyncpg.connect(settings.metadata_dsn())
        try:
            return list(await connection.fetch(statement))
        finally:
            await connection.close()

    return asyncio.run(run())


def test_a_remap_s_pending_mirrors_are_corrected_before_a_page_relies_on_them(
    many, api, settings
) -> None:
    """A remap whose corrections some shard missed (its mirror_pending row stays): the next
    page of a prefix corrects that mirror first (no 503, and no row of the owner for its old
    tenant); a forced remap through the API moves the owner's rows from one tenant's
    no-owner pages to the other's."""
    ours, theirs = many["clients"]["ours"], many["clients"]["theirs"]
    key = f"{BASE}moved"
    post_audit_rows(theirs, key, DAY + timedelta(hours=9), 3, f"theirs {key}")
    ident = owner_id(api, "audit", key)
    assert ident is not None
    shards = on_shards(
        catalog_shards(api),
        f"UPDATE shard_owners SET tenant = 'many-ours-{RUN}' "
        f"WHERE kind = 'audit' AND owner_id = {ident} RETURNING 1",
    )
    assert shards
    metadata_sql(
        settings,
        "INSERT INTO mirror_pending (kind, owner_id, recorded_at) "
        f"VALUES ('audit', {ident}, now() - interval '2 minutes')",
    )
    items = found(ours, {**WINDOW, "owner_prefix": f"{BASE}m", "limit": 50})
    assert key not in {item["owner"] for item in items}
    assert not metadata_sql(settings, f"SELECT 1 FROM mirror_pending WHERE owner_id = {ident}")
    assert not on_shards(
        catalog_shards(api),
        f"SELECT 1 FROM shard_owners WHERE owner_id = {ident} AND tenant <> 'many-theirs-{RUN}'",
    )
    assert key in {item["owner"] for item in found(theirs, {**WINDOW, "owner_prefix": f"{BASE}m"})}

    group = owner_group(api, key)
    moved = many["admin"].put(
        "/v1/admin/owners",
        json={"kind": "audit", "key": key, "group": group, "tenant": f"many-ours-{RUN}"},
    )
    assert moved.status_code == 409, moved.text
    forced = many["admin"].put(
        "/v1/admin/owners",
        json={
            "kind": "audit",
            "key": key,
            "group": group,
            "tenant": f"many-ours-{RUN}",
            "force": True,
        },
    )
    assert forced.status_code == 200, forced.text
    assert metadata_sql(settings, f"SELECT 1 FROM mirror_pending WHERE owner_id = {ident}")
    assert key in {item["owner"] for item in found(ours, {**WINDOW, "owner_prefix": f"{BASE}m"})}
    assert key not in {
        item["owner"] for item in found(theirs, {**WINDOW, "owner_prefix": f"{BASE}m"})
    }
    many["written"]["ours"] += [
        ((DAY + timedelta(hours=9, seconds=n)).isoformat(), key) for n in range(3)
    ]


def owner_group(api: httpx.Client, key: str) -> str:
    answer = api.get("/v1/admin/owners", params={"kind": "audit", "key": key})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["group"])


def reported(client: httpx.Client, params: dict[str, Any]) -> list[dict[str, Any]]:
    answer = client.get("/v1/audit/report", params={**WINDOW, **params})
    assert answer.status_code == 200, answer.text
    groups: list[dict[str, Any]] = answer.json()["groups"]
    return groups


def test_reports_of_a_prefix_or_no_owner_group_the_shard_days_by_their_owners(many) -> None:
    """Reports read the shard-days too (tagged by the mirrors' keys), past the report's cap of
    owners: per owner and in all, what the tenant wrote, no other tenant's."""
    for side, prefix in (("ours", PREFIX), ("theirs", f"{BASE}b"), ("ours", f"{PREFIX}%")):
        client = many["clients"][side]
        rows = expected(many, side, lambda key, prefix=prefix: key.startswith(prefix))
        by_owner = reported(client, {"owner_prefix": prefix, "group_by": "owner"})
        counts: dict[str, int] = {}
        for _, key in rows:
            counts[key] = counts.get(key, 0) + 1
        assert {g["owner"]: g["rows"] for g in by_owner} == counts, (side, prefix)
        total = reported(client, {"owner_prefix": prefix})
        assert total == [{"rows": len(rows)}], (side, prefix)


def test_exports_of_no_owner_render_the_shard_days_owners_as_the_pages_do(many) -> None:
    """NDJSON lines are the search's items (keys, refs and all, made by the router for pages
    and by the shards for exports); CSV rows hold the same cells, the formula-like key behind
    a quote."""
    theirs = many["clients"]["theirs"]
    items = found(theirs, {**WINDOW, "limit": 1000})
    assert FORMULA_KEY in {item["owner"] for item in items}
    ndjson = theirs.get("/v1/audit/export", params={**WINDOW, "format": "ndjson"})
    assert ndjson.status_code == 200, ndjson.text
    assert [orjson.loads(line) for line in ndjson.content.splitlines()] == items
    text = theirs.get("/v1/audit/export", params={**WINDOW, "format": "csv"})
    assert text.status_code == 200, text.text
    rows = list(csv.reader(io.StringIO(text.text)))
    assert rows[0] == ["ts", "id", "owner", "shard", "content", "attrs"]
    assert rows[1:] == [
        [
            item["ts"],
            str(item["id"]),
            str(csv_cell(item["owner"])),
            item["shard"],
            item["content"],
            "" if item["attrs"] is None else orjson.dumps(item["attrs"]).decode(),
        ]
        for item in items
    ]


def test_a_tail_of_no_owner_replays_the_shard_days(many) -> None:
    """A tail from a past instant replays the rows already written (pinned pages): past the
    cap of owners, each of the tenant's rows once, in order, no other tenant's."""
    theirs = many["clients"]["theirs"]
    url = str(theirs.base_url).rstrip("/")
    want = expected(many, "theirs")
    params = {"from": DAY.isoformat()}
    with TailClient(url, "/v1/audit/tail", params, many["tokens"]["theirs"]) as tail:
        tail.wait(lambda t: len(t.rows()) >= len(want) or t.status not in (None, 200))
        assert tail.status == 200
        rows = tail.rows()
    assert sorted(as_written(rows)) == want
    assert all(row["replayed"] for row in rows)
    assert [row["ts"] for row in rows] == sorted(row["ts"] for row in rows)
