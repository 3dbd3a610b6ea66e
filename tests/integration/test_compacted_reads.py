"""Reads of compacted owner-days answer exactly as the heap did (docs/architecture.md, "Reading
a compacted owner-day"). One dataset of several owners on a past day is searched in many forms
(patterns short and long, one and two, regex and iregex, both orders, page sizes, counts,
consistent searches), its refs, export and report read; then every owner-day is compacted
(copied into segments, switched, its heap cleared) and the same requests must give the same
answers, the cursors taken on the heap must continue on the segments, and a row written late
must take its place in the order."""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import httpx
import orjson
import pytest

from bench.shard_view import catalog_shards, day_tables, owner_id, shard_sql
from router.db.names import parse_day_table
from router.search import sql
from router.search.query import AuditQuery, Keys, Window
from router.settings import Settings
from tests.integration.test_search import cursor_position, key_of, post
from tests.support import past_day, run_cli

DAY = past_day(3, 0)
WINDOW = {"from": DAY.isoformat(), "to": (DAY + timedelta(days=1)).isoformat()}
ROWS_PER_OWNER = 70
SEGMENT_ROWS = 16  # many segments of a few rows: the bounds and the keyset folding matter
WORDS = ["alpha", "beta", "gamma", "Abc", "abx", "delta", "epsilon"]
RARE = "zebra-rare"
LONG = "a-long-and-common-phrase-of-the-log"

FORMS: list[dict[str, Any]] = [
    {},
    {"q": "alpha"},
    {"q": "ab"},  # under 3 bytes: no filter applies
    {"q": RARE},
    {"q": ["alpha", "beta"]},
    {"q": LONG},
    {"q": "ab[cx]", "match": "regex"},
    {"q": "^ABC", "match": "iregex"},
    # Literals every match holds (router/compaction/literals.py) probe the segments' filters.
    {"q": "zebra-.are", "match": "regex"},
    {"q": "ZEBRA-(x|r)are", "match": "iregex"},
    {"q": "(gamma|delta) .*phrase", "match": "regex"},
    {"q": "beta", "consistent": "true"},
]
ORDERS = ["asc", "desc"]
LIMITS = [9, 1000]


def content(rng: random.Random, n: int) -> str:
    words = rng.sample(WORDS, 3)
    if rng.random() < 0.05:
        words.append(RARE)
    if rng.random() < 0.6:
        words.append(LONG)
    return f"{n} " + " ".join(words)


def rows_of(owner: str, rng: random.Random) -> list[dict[str, Any]]:
    rows = []
    for n in range(ROWS_PER_OWNER):
        # Few distinct seconds: many ties on ts, broken by id.
        ts = DAY + timedelta(hours=6, seconds=rng.randrange(25))
        row: dict[str, Any] = {"owner": owner, "ts": ts.isoformat(), "content": content(rng, n)}
        if rng.random() < 0.5:
            row["attrs"] = {"n": n, "tag": rng.choice(["x", "y", None])}
        rows.append(row)
    return rows


def pages(
    api: httpx.Client,
    params: dict[str, Any],
    cursor: str | None = None,
    path: str = "/v1/audit/search",
) -> list[dict]:
    """Every page from ``cursor`` on (the first when None)."""
    found = []
    while True:
        response = api.get(path, params={**params, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200, response.text
        page = response.json()
        found.append(page)
        cursor = page["next_cursor"]
        if cursor is None:
            return found


def answer(found: list[dict]) -> list[Any]:
    """What must not move: the items page by page, the count, the cursors' positions."""
    return [
        (
            page["items"],
            page.get("count"),
            cursor_position(page["next_cursor"]),
            cursor_position(page["prev_cursor"]),
        )
        for page in found
    ]


def forms(
    owners: list[str],
    shapes: list[dict[str, Any]] = FORMS,
    key: str = "owner",
    window: dict[str, str] = WINDOW,
) -> list[dict[str, Any]]:
    """Each search form over ``owners`` (of ``key``: owner, switch), both orders, small and
    large pages, counted."""
    return [
        {key: owners, **window, **form, "order": order, "limit": limit, "count": "exact"}
        for form in shapes
        for order in ORDERS
        for limit in LIMITS
    ]


def export(
    api: httpx.Client, owners: list[str], format: str, path: str = "/v1/audit/export"
) -> bytes:
    """The export of ``owners`` (switches with the flows' ``path``) over the day."""
    key = "switch" if path.startswith("/v1/flows") else "owner"
    response = api.get(path, params={key: owners, **WINDOW, "format": format})
    assert response.status_code == 200, response.text
    return response.content


def report(api: httpx.Client, owners: list[str]) -> Any:
    response = api.get(
        "/v1/audit/report",
        params={
            "owner": owners,
            **WINDOW,
            "q": "alpha",
            "group_by": "owner,bucket",
            "bucket": "1m",
        },
    )
    assert response.status_code == 200, response.text
    return response.json()


# --- compacting an owner-day, by the design's rules ------------------------------------------


def compact(
    settings: Settings, owner: str, clear: bool = True, kind: str = "audit"
) -> list[dict[str, Any]]:
    """Every day table of ``owner`` (of ``kind``) compacted by `shardlog compact`: copied into
    segments under one snapshot, switched in the catalog, its heap cleared (unless not
    ``clear``: the rows are then in the heap and the segments both, the heap's excluded by the
    snapshot). The owner-days compacted."""
    result = run_cli(
        settings,
        "compact",
        "--json",
        "--kind",
        kind,
        "--owner",
        owner,
        *(["--clear-now"] if clear else []),
        env={"SHARDLOG_COMPACTION__SEGMENT_ROWS": str(SEGMENT_ROWS)},
    )
    assert result.returncode == 0, result.stderr
    owner_days: list[dict[str, Any]] = json.loads(result.stdout)["owner_days"]
    assert owner_days and {o["kind"] for o in owner_days} == {kind}, owner_days
    assert {o["state"] for o in owner_days} == ({"done"} if clear else {"wait"}), owner_days
    return owner_days


@pytest.fixture(scope="module")
def compacted(api, settings) -> dict[str, Any]:
    """The answers on the heap, then every owner-day compacted."""
    tag = uuid.uuid4().hex[:8]
    owners = [f"packed-{tag}-{n}" for n in range(3)]
    late = f"packed-{tag}-late"
    rng = random.Random(37)
    for owner in [*owners, late]:
        for start in range(0, ROWS_PER_OWNER, 20):  # several requests: several shards
            post(api, "/v1/audit", rows_of(owner, rng)[start : start + 20])
    before = {
        "forms": {orjson.dumps(p): answer(pages(api, p)) for p in forms(owners)},
        "first_pages": {
            orjson.dumps(p): api.get("/v1/audit/search", params=p).json() for p in forms(owners)
        },
        "export": {f: export(api, owners, f) for f in ("ndjson", "csv")},
        "report": report(api, owners),
        "late": pages(api, {"owner": late, **WINDOW, "limit": 1000}),
    }
    # The first owner's heap is kept: its rows are in the heap and the segments both.
    days = sum(len(compact(settings, owner, clear=owner != owners[0])) for owner in [*owners, late])
    assert days >= len(owners) + 1
    return {"owners": owners, "late": late, "before": before}


def test_a_page_unpacks_the_first_segments_alone(api, compacted) -> None:
    """The plan the design counts on: the segments in primary-key order, an incremental sort
    by (seq, ord) under the LIMIT, which stops reading segments once the page is full. On an
    owner-day of its own, made in SQL (many segments, analysed)."""
    ident = owner_id(api, "audit", compacted["owners"][1])
    assert ident is not None
    shard, tables = next(iter(day_tables(api, "audit", ident).items()))
    dsn = catalog_shards(api)[shard]
    heap = parse_day_table(tables[0])
    assert heap is not None
    table = replace(heap, owner_id=10**12 + 37, compacted=True)
    shard_sql(
        dsn,
        f"CREATE TABLE {table.quoted} (LIKE {heap.quoted} INCLUDING ALL); "
        f"INSERT INTO {table.segments} SELECT {table.owner_id}, n, t, n * 50, t, n * 50 + 49, 50, "
        "shardlog_grams(array_fill('line'::text, ARRAY[50])), shardlog_pack_audit("
        "ARRAY(SELECT n * 50 + k FROM generate_series(0, 49) AS k), array_fill(t, ARRAY[50]), "
        "array_fill('line'::text, ARRAY[50]), array_fill(NULL::jsonb, ARRAY[50]), "
        "array_fill(NULL::xid8, ARRAY[50])) FROM generate_series(0, 999) AS n, "
        f"LATERAL (SELECT TIMESTAMPTZ '{DAY.isoformat()}' + n * INTERVAL '1 s' AS t) AS at; "
        f"ANALYZE {table.segments}",
    )
    try:
        for descending in (False, True):
            query = AuditQuery(
                Keys.of(["any"]), Window(DAY, DAY + timedelta(days=1)), (), "substring", "asc"
            )
            text, params = sql.page_sql(query, [table], shard, None, descending, 120)
            plan = asyncio.run(explain(dsn, text, params))
            nodes = list(walk(plan[0]["Plan"]))
            assert any(n["Node Type"] == "Incremental Sort" for n in nodes), plan
            read = [n for n in nodes if n.get("Relation Name") == table.segments.strip('"')]
            assert read and read[0]["Actual Rows"] <= 4, plan  # of 1,000 segments
    finally:
        shard_sql(
            dsn,
            f"DROP TABLE {table.quoted}; "
            f"DELETE FROM {table.segments} WHERE owner_id = {table.owner_id}",
        )


def walk(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from walk(child)


async def explain(dsn: str, text: str, params: list[Any]) -> Any:
    connection = await asyncpg.connect(dsn)
    try:
        analysed = await connection.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {text}", *params)
        return orjson.loads(analysed)
    finally:
        await connection.close()


# --- the answers -------------------------------------------------------------------------------


def answers_alike(api: httpx.Client, before: dict[str, Any], path: str) -> None:
    """Every form of ``before`` answers page by page as it did, and back from its last page
    too: the keyset the other way over the same segments."""
    for key, expected in before["forms"].items():
        params = orjson.loads(key)
        found = pages(api, params, path=path)
        assert answer(found) == expected, params
        back, cursor = [found[-1]["items"]], found[-1]["prev_cursor"]
        while cursor:
            page = api.get(path, params={**params, "cursor": cursor}).json()
            back.insert(0, page["items"])
            cursor = page["prev_cursor"]
        forward = [item for page in found for item in page["items"]]
        assert [item for page in back for item in page] == forward, params


def cursors_continue(api: httpx.Client, before: dict[str, Any], path: str) -> None:
    """The first pages' cursors, taken before the compaction, continue after it."""
    for key, first in before["first_pages"].items():
        params = orjson.loads(key)
        expected = [item for page in before["forms"][key] for item in page[0]]
        rest = pages(api, params, first["next_cursor"], path) if first["next_cursor"] else []
        assert first["items"] + [i for page in rest for i in page["items"]] == expected, params


def test_every_search_form_answers_as_on_the_heap(api, compacted) -> None:
    answers_alike(api, compacted["before"], "/v1/audit/search")


def test_a_cursor_taken_on_the_heap_continues_on_the_segments(api, compacted) -> None:
    cursors_continue(api, compacted["before"], "/v1/audit/search")


def refs_resolve(
    api: httpx.Client, before: dict[str, Any], key: bytes, rows: int, path: str
) -> None:
    """Refs of the rows form ``key`` found before the compaction (``rows`` of them) resolve
    to the same rows after it."""
    items = [item for page in before["forms"][key] for item in page[0]]
    assert len(items) == rows
    for item in random.Random(5).sample(items, 25):
        response = api.get(f"{path}/{item['ref']}")
        assert response.status_code == 200, response.text
        assert response.json() == item


def test_refs_issued_on_the_heap_resolve_to_the_same_rows(api, compacted) -> None:
    key = orjson.dumps(forms(compacted["owners"])[1])  # limit 1000, ascending
    refs_resolve(api, compacted["before"], key, 3 * ROWS_PER_OWNER, "/v1/audit/rows")


def test_exports_and_reports_read_the_segments_alike(api, compacted) -> None:
    for format, body in compacted["before"]["export"].items():
        assert export(api, compacted["owners"], format) == body
    assert report(api, compacted["owners"]) == compacted["before"]["report"]


def test_an_estimate_over_compacted_days_counts_them(api, compacted) -> None:
    """A few hundred rows: their candidate segments are all opened (test_compacted_estimate)."""
    params = {"owner": compacted["owners"], **WINDOW, "q": "alpha", "limit": 1}
    exact = api.get("/v1/audit/search", params={**params, "count": "exact"}).json()["count"]
    estimated = api.get("/v1/audit/search", params={**params, "count": "estimate"}).json()
    value = exact["value"]
    assert estimated["count"] == {
        "value": value,
        "exact": True,
        "method": "segments",
        "bounds": [value, value],
    }


def test_a_late_row_takes_its_place_in_the_order(api, compacted) -> None:
    late, before = compacted["late"], compacted["before"]["late"][0]["items"]
    middle = datetime.fromisoformat(before[len(before) // 2]["ts"])
    post(api, "/v1/audit", [{"owner": late, "ts": middle.isoformat(), "content": "late alpha"}])
    for order in ORDERS:
        params = {"owner": late, **WINDOW, "order": order, "count": "exact"}
        for limit in (7, 1000):
            found = [i for page in pages(api, {**params, "limit": limit}) for i in page["items"]]
            assert len(found) == len(before) + 1
            assert [i for i in found if i["content"] != "late alpha"] == (
                before if order == "asc" else before[::-1]
            )
            keys = [key_of(i) for i in found]
            assert keys == sorted(keys, reverse=order == "desc")
        counted = api.get("/v1/audit/search", params={**params, "q": "alpha", "limit": 1}).json()
        assert counted["count"]["value"] == 1 + sum("alpha" in i["content"] for i in before)
