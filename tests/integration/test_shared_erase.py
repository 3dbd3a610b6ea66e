"""Erase of an owner whose rows are in shared tables (issue 38; docs/architecture.md,
"Retention, erase, archive", "Erase"): `shardlog owner erase` deletes the owner's rows from the
shared tables of the shards it wrote into (in batches of SHARDLOG_SHARED__DELETE_BATCH_ROWS),
the days before --before only when given, and drops its own tables as before; --forget also
takes its key out of the shards' mirrors and its owner_shards rows out of the catalog. Another
owner's rows in the same shared tables are untouched. The oracle is what the test wrote and
the shards' tables read directly."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from bench.shard_view import catalog_shards, owner_id, shard_sql
from router.settings import Settings
from tests.support import (
    past_day,
    placed_counts,
    post_audit_rows,
    run_cli,
    search_items,
    sharing_client,
)

OWN_TABLE_ROWS = 20
# Shared days of the owner, oldest first, and a day of its own table.
SHARED_DAYS = [past_day(9, 12), past_day(8, 12), past_day(7, 12)]
OWN_DAY = past_day(6, 12)
WINDOW = {
    "from": (SHARED_DAYS[0] - timedelta(hours=12)).isoformat(),
    "to": (OWN_DAY + timedelta(hours=12)).isoformat(),
}


@pytest.fixture(scope="module")
def client(
    settings: Settings, tmp_path_factory: pytest.TempPathFactory, api: httpx.Client
) -> Iterator[httpx.Client]:
    env = {"SHARDLOG_SHARED__OWN_TABLE_ROWS": str(OWN_TABLE_ROWS)}
    with sharing_client(settings, tmp_path_factory.mktemp("erase-router"), api, env) as session:
        yield session


def mirror_rows(api: httpx.Client, ident: int) -> int:
    """The shards' mirror rows of the owner id, summed over the shards that answer."""

    async def on(dsn: str) -> int:
        try:
            connection = await asyncpg.connect(dsn, timeout=5)
        except (OSError, asyncpg.PostgresError):
            return 0  # a shard another test stopped
        try:
            return int(
                await connection.fetchval(
                    "SELECT count(*) FROM shard_owners WHERE kind = 'audit' AND owner_id = $1",
                    ident,
                )
            )
        finally:
            await connection.close()

    async def everywhere() -> int:
        return sum(await asyncio.gather(*(on(dsn) for dsn in catalog_shards(api).values())))

    return asyncio.run(everywhere())


def erase(settings: Settings, owner: str, *flags: str) -> dict[str, Any]:
    # Batches of 2 rows: the owner's 5 rows of a shared day take three.
    env = {"SHARDLOG_SHARED__DELETE_BATCH_ROWS": "2"}
    result = run_cli(settings, "owner", "erase", owner, *flags, "--json", env=env)
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(result.stdout)
    return report


def test_an_erase_deletes_the_owners_shared_rows_and_no_one_elses(
    client: httpx.Client, api: httpx.Client, settings: Settings
) -> None:
    tag = uuid.uuid4().hex[:8]
    owner, neighbour = f"erased-{tag}", f"kept-{tag}"
    for day in SHARED_DAYS:
        post_audit_rows(client, owner, day, 5, "erased")
        post_audit_rows(client, neighbour, day, 4, "kept")
    post_audit_rows(client, owner, OWN_DAY, 3 * OWN_TABLE_ROWS, "big")  # a part for an own table
    ident, other = owner_id(api, "audit", owner), owner_id(api, "audit", neighbour)
    assert ident is not None and other is not None
    assert [placed_counts(api, ident, day) for day in SHARED_DAYS] == [(5, 0)] * 3
    assert placed_counts(api, ident, OWN_DAY) == (0, 3 * OWN_TABLE_ROWS)
    assert mirror_rows(api, ident) >= 1

    # The days before the second shared day only: its first.
    partial = erase(settings, owner, "--before", SHARED_DAYS[1].date().isoformat())
    assert partial["complete"] and not partial["forgotten"], partial
    purged = {(e["day"], e["rows"]) for e in partial["shared_purged"] if e["rows"]}
    assert purged == {(SHARED_DAYS[0].date().isoformat(), 5)}, partial["shared_purged"]
    assert [placed_counts(api, ident, day) for day in SHARED_DAYS] == [(0, 0), (5, 0), (5, 0)]
    items = search_items(api, "audit", {"owner": owner, **WINDOW, "limit": 1000})
    assert len(items) == 2 * 5 + 3 * OWN_TABLE_ROWS

    report = erase(settings, owner, "--forget")
    assert report["complete"] and report["forgotten"], report
    assert sum(e["rows"] for e in report["shared_purged"]) == 10
    assert [entry["day"] for entry in report["dropped"]] == [OWN_DAY.date().isoformat()]
    for day in [*SHARED_DAYS, OWN_DAY]:
        assert placed_counts(api, ident, day) == (0, 0), day
    assert mirror_rows(api, ident) == 0
    left = shard_sql(
        settings.metadata_dsn(),
        f"SELECT count(*) FROM owner_shards WHERE kind = 'audit' AND owner_id = {ident}",
    )
    assert left.strip() == "0"
    assert api.get("/v1/admin/owners", params={"kind": "audit", "key": owner}).status_code == 404

    # The other owner of the same shared tables keeps every row, and its mirror row.
    assert [placed_counts(api, other, day) for day in SHARED_DAYS] == [(4, 0)] * 3
    kept = search_items(api, "audit", {"owner": neighbour, **WINDOW, "limit": 1000})
    assert [item["content"] for item in kept] == ["kept"] * 12
    assert mirror_rows(api, other) >= 1
