"""count=estimate over compacted owner-days, from their segment metadata
(router/search/segment_estimate.py), against counts made here in Python over the rows the test
wrote: a rare pattern whose trigrams rule out most segments is counted exactly; a common one is
sampled and its bounds hold the true count; a window alone counts by the segments' rows;
heap and compacted owner-days together; another tenant's rows never counted; a stopped shard
makes the answer partial, without bounds."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from bench.shard_view import catalog_shards, day_tables, owner_id
from router.db.names import parse_day_table
from router.search import segment_sql
from router.search.query import AuditQuery, Keys, Window
from router.settings import SearchSettings
from tests.integration.test_compacted_reads import SEGMENT_ROWS, compact
from tests.integration.test_search import post
from tests.support import another_router, bearer, past_day, running_router

DAY = past_day(4, 0)
WINDOW = {"from": DAY.isoformat(), "to": (DAY + timedelta(days=1)).isoformat()}
ROWS = 100 * SEGMENT_ROWS  # 100 segments
HEAP_ROWS = 300  # a day table of a few pages: its estimate reads it whole (method count)
WORDS = ["alpha", "beta", "gamma", "delta", "omega"]
RARE = "xylophone-77"
RARE_ROWS = (137, 600, 601, 1234, 1590)
# The sampling router: candidates of more than 200 rows are sampled, 320 rows opened.
COUNT_BELOW_ROWS, SAMPLE_ROWS = 200, 320


def rows_of(owner: str, count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    step = timedelta(days=1) / (count + 1)
    rows = []
    for n in range(count):
        words = rng.sample(WORDS, 2) + ([RARE] if n in RARE_ROWS else [])
        ts = DAY + step * (n + 1)
        rows.append({"owner": owner, "ts": ts.isoformat(), "content": f"{n:06d} {' '.join(words)}"})
    return rows


def write(client: httpx.Client, rows: list[dict[str, Any]]) -> None:
    for start in range(0, len(rows), 400):  # several requests: several shards
        post(client, "/v1/audit", rows[start : start + 400])


def truth(rows: list[dict[str, Any]], pattern: str | None, window: dict[str, str]) -> int:
    start, end = (datetime.fromisoformat(window[k]) for k in ("from", "to"))
    return sum(
        1
        for row in rows
        if start <= datetime.fromisoformat(row["ts"]) < end
        and (pattern is None or pattern in row["content"])
    )


def estimate(client: httpx.Client, params: dict[str, Any]) -> dict[str, Any]:
    response = client.get("/v1/audit/search", params={**params, "limit": 1, "count": "estimate"})
    assert response.status_code == 200, response.text
    count: dict[str, Any] = response.json()["count"]
    return count


@pytest.fixture(scope="module")
def world(api, default_api, settings) -> dict[str, Any]:
    """Three owners on one past day: one compacted and one left on the heap (the system
    tenant's), one compacted of the tenant ``default``; all share a stem."""
    stem = f"segest-{uuid.uuid4().hex[:8]}"
    packed, heap, foreign = f"{stem}-packed", f"{stem}-heap", f"{stem}-foreign"
    rows = {
        packed: rows_of(packed, ROWS, 1),
        heap: rows_of(heap, HEAP_ROWS, 2),
        foreign: rows_of(foreign, ROWS // 4, 3),
    }
    write(api, rows[packed])
    write(api, rows[heap])
    write(default_api, rows[foreign])
    assert len(compact(settings, packed)) >= 1
    assert len(compact(settings, foreign)) >= 1
    return {"stem": stem, "packed": packed, "heap": heap, "foreign": foreign, "rows": rows}


@pytest.fixture(scope="module")
def sampling(settings, api_token, tmp_path_factory) -> Iterator[httpx.Client]:
    """A router of its own whose estimates sample compacted owner-days of a few hundred rows."""
    env = {
        "SHARDLOG_SEARCH__ESTIMATE_SEGMENT_COUNT_BELOW_ROWS": str(COUNT_BELOW_ROWS),
        "SHARDLOG_SEARCH__ESTIMATE_SEGMENT_SAMPLE_ROWS": str(SAMPLE_ROWS),
    }
    home = tmp_path_factory.mktemp("segment-estimate")
    with (
        running_router(another_router(settings, home, env)) as router,
        httpx.Client(base_url=router.url, timeout=30, headers=bearer(api_token)) as client,
    ):
        yield client


def test_a_rare_pattern_is_counted_from_its_few_candidate_segments(api, sampling, world) -> None:
    rows = world["rows"][world["packed"]]
    params = {"owner": world["packed"], **WINDOW, "q": RARE}
    expected = truth(rows, RARE, WINDOW)
    assert expected == len(RARE_ROWS)
    assert estimate(api, params) == {
        "value": expected,
        "exact": True,
        "method": "segments",
        "bounds": [expected, expected],
    }
    # Counted whole on the sampling router too: its trigrams leave a few segments.
    assert estimate(sampling, params) == estimate(api, params)


def test_a_common_pattern_is_sampled_within_bounds_that_hold(api, sampling, world) -> None:
    rows = world["rows"][world["packed"]]
    for window in (WINDOW, {"from": (DAY + timedelta(hours=2)).isoformat(), "to": WINDOW["to"]}):
        params = {"owner": world["packed"], **window, "q": "alpha"}
        expected = truth(rows, "alpha", window)
        found = estimate(sampling, params)
        assert found["method"] == "segments" and found["exact"] is False, found
        low, high = found["bounds"]
        assert low <= expected <= high, (found, expected)
        assert low <= found["value"] <= high, found
        assert low < high  # segments were left unopened
        assert abs(found["value"] - expected) <= 0.25 * expected, (found, expected)
        # The same answer again: the sample is chosen by seq, not drawn.
        assert estimate(sampling, params) == found
        # The session router's threshold counts these 1,600 rows exactly.
        assert estimate(api, params) == {
            "value": expected,
            "exact": True,
            "method": "segments",
            "bounds": [expected, expected],
        }


def test_a_window_alone_counts_by_the_segments_rows(api, sampling, world) -> None:
    rows = world["rows"][world["packed"]]
    part = {
        "from": (DAY + timedelta(hours=3)).isoformat(),
        "to": (DAY + timedelta(hours=15, minutes=7)).isoformat(),
    }
    for window in (WINDOW, part):
        expected = truth(rows, None, window)
        params = {"owner": world["packed"], **window}
        for client in (api, sampling):
            found = estimate(client, params)
            assert found == {
                "value": expected,
                "exact": True,
                "method": "segments",
                "bounds": [expected, expected],
            }
    # Over the whole day, not one segment is opened: each counts by its rows.
    assert opened_and_counted(api, world["packed"], None) == (0, ROWS)
    alpha = truth(rows, "alpha", WINDOW)
    assert opened_and_counted(api, world["packed"], "alpha") == (ROWS, alpha)


def test_a_consistent_estimate_keeps_to_the_snapshot(api, sampling, settings, world) -> None:
    """A row written into the compacted day after a consistent search's first page (a late
    heap row) is not counted by its next pages' estimates, counted or sampled."""
    owner = f"{world['stem']}-late"
    rows = rows_of(owner, ROWS, 4)
    write(api, rows)
    assert len(compact(settings, owner)) >= 1
    params = {"owner": owner, **WINDOW, "q": "beta", "consistent": "true", "limit": 1}
    expected = truth(rows, "beta", WINDOW)
    cursors = {}
    for name, client in (("api", api), ("sampling", sampling)):
        first = client.get("/v1/audit/search", params={**params, "count": "estimate"}).json()
        cursors[name] = first["next_cursor"]
    late = (DAY + timedelta(hours=12)).isoformat()
    post(api, "/v1/audit", [{"owner": owner, "ts": late, "content": "late beta"}])
    for name, client in (("api", api), ("sampling", sampling)):
        cursor = {"cursor": cursors[name], "count": "estimate"}
        found = client.get("/v1/audit/search", params={**params, **cursor}).json()["count"]
        low, high = found["bounds"]
        assert low <= expected <= high and found["method"] == "segments", found
        if name == "api":
            assert found == {"value": expected, "exact": True, "method": "segments"} | {
                "bounds": [expected, expected]
            }
        now = estimate(client, params)
        assert now["bounds"][0] <= expected + 1 <= now["bounds"][1], now
    assert estimate(api, params)["value"] == expected + 1


def test_heap_and_compacted_owner_days_together(api, sampling, world) -> None:
    owners = [world["packed"], world["heap"]]
    expected = sum(truth(world["rows"][o], "alpha", WINDOW) for o in owners)
    params = {"owner": owners, **WINDOW, "q": "alpha"}
    assert estimate(api, params) == {
        "value": expected,
        "exact": True,
        "method": "count+segments",
        "bounds": [expected, expected],
    }
    found = estimate(sampling, params)
    assert found["method"] == "count+segments" and found["exact"] is False, found
    assert found["bounds"][0] <= expected <= found["bounds"][1], (found, expected)
    heap_alone = estimate(sampling, {**params, "owner": world["heap"]})
    assert heap_alone == {
        "value": truth(world["rows"][world["heap"]], "alpha", WINDOW),
        "exact": True,
        "method": "count",
        "bounds": None,
    }


def test_another_tenants_estimate_counts_its_own_rows_alone(api, default_api, world) -> None:
    mine = world["rows"][world["foreign"]]
    for pattern in (None, "alpha"):
        condition = {**WINDOW, **({"q": pattern} if pattern else {})}
        expected = truth(mine, pattern, WINDOW)
        response = default_api.get(
            "/v1/audit/search",
            params={"owner_prefix": world["stem"], **condition, "count": "estimate"},
        )
        assert response.status_code == 200, response.text
        assert {item["owner"] for item in response.json()["items"]} == {world["foreign"]}
        assert response.json()["count"] == {
            "value": expected,
            "exact": True,
            "method": "segments",
            "bounds": [expected, expected],
        }
        theirs = estimate(api, {"owner": world["packed"], **condition})
        assert theirs["value"] == truth(world["rows"][world["packed"]], pattern, WINDOW)
    refused = default_api.get(
        "/v1/audit/search", params={"owner": world["packed"], **WINDOW, "count": "estimate"}
    )
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["field"] == "owner"


def test_a_stopped_shard_makes_the_estimate_partial(api, sampling, world, cluster) -> None:
    packed = world["packed"]
    ident = owner_id(api, "audit", packed)
    assert ident is not None
    holding = set(day_tables(api, "audit", ident))
    dsns = catalog_shards(api)
    victim = next(i for i in cluster.shards if any(f":{i.spec.port}/" in dsns[s] for s in holding))
    down = {name for name, dsn in dsns.items() if f":{victim.spec.port}/" in dsn} & holding
    params = {"owner": packed, **WINDOW, "q": "alpha", "limit": 1, "count": "estimate"}
    expected = truth(world["rows"][packed], "alpha", WINDOW)
    victim.stop()
    try:
        for client in (api, sampling):
            body = client.get("/v1/audit/search", params=params).json()
            assert body["partial"] is True, body
            assert {f["shard"] for f in body["failed_shards"]} == down
            assert body["count"]["exact"] is False and body["count"]["bounds"] is None, body
            assert body["count"]["value"] <= expected
            strict = client.get("/v1/audit/search", params={**params, "partial": "false"})
            assert strict.status_code == 503, strict.text
    finally:
        victim.start()


# --- helpers -----------------------------------------------------------------------------------


def opened_and_counted(api: httpx.Client, owner: str, pattern: str | None) -> tuple[int, int]:
    """The rows of the segments an estimate of ``owner``'s whole day opens, and the rows it
    counts: the statement the router runs, on each shard, with the session's thresholds."""
    ident = owner_id(api, "audit", owner)
    assert ident is not None
    dsns = catalog_shards(api)
    query = AuditQuery(
        Keys.of([owner]),
        Window(DAY, DAY + timedelta(days=1)),
        (pattern,) if pattern else (),
        "substring",
        "asc",
    )
    search = SearchSettings()
    opened = counted = 0
    for shard, names in day_tables(api, "audit", ident).items():
        tables = [parse_day_table(name) for name in names]
        compacted = [replace(t, compacted=True) for t in tables if t is not None]
        text, params = segment_sql.sample_sql(
            query,
            compacted,
            search.estimate_segment_count_below_rows,
            search.estimate_segment_sample_rows,
        )
        for row in asyncio.run(fetch(dsns[shard], text, params)):
            counted, opened = counted + row[0], opened + row[2]
    return opened, counted


async def fetch(dsn: str, text: str, params: list[Any]) -> list[asyncpg.Record]:
    connection = await asyncpg.connect(dsn)
    try:
        return list(await connection.fetch(text, *params))
    finally:
        await connection.close()
