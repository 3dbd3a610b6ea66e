"""Owners' own retention policies over shared days (issue 38; docs/architecture.md, "Retention,
erase, archive"). A shared day expires by its group's policy; an owner whose policy is
shorter loses its rows of the days in between by the throttled delete (listed by a dry run,
done by a run, another owner's rows untouched); one whose policy is longer has its rows of a
shared day the run drops moved to a table of its own first, and a shared table whose rows of
such an owner cannot move is kept (held), never dropped with them. The oracle is what the
test wrote and the shards' tables read directly.

A run that really drops shared days of the session's catalog would drop other tests' days, so
the longer policy's drop is taken up to the drop (the runner's plan and ``keep_longer``,
which decides what the drop may take); the drop itself is tested in test_shared_ahead."""

from __future__ import annotations

import asyncio
import gzip
import json
import uuid
from collections.abc import Awaitable, Callable, Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any, TypeVar

import asyncpg
import httpx
import pytest

from bench.shard_view import catalog_shards, owner_id
from router.catalog import store
from router.catalog.snapshot import CatalogSnapshot
from router.db import catalog_login
from router.db.names import owner_days_table, shared_table
from router.db.pools import ShardPools
from router.retention import archive, inventory, owner_shared, shared_days
from router.retention.runner import RetentionRunner, RunOptions
from router.retention.shared_dropper import SharedDropper
from router.settings import Settings
from tests.support import (
    map_audit_owner,
    past_day,
    placed_counts,
    post_audit_rows,
    run_cli,
    search_items,
    sharing_client,
)

DAYS = [past_day(9, 12), past_day(8, 12), past_day(7, 12)]
POLICIES = "/v1/admin/retention/policies"


@pytest.fixture(scope="module")
def client(
    settings: Settings, tmp_path_factory: pytest.TempPathFactory, api: httpx.Client
) -> Iterator[httpx.Client]:
    with sharing_client(settings, tmp_path_factory.mktemp("retention-router"), api) as session:
        yield session


def set_policy(api: httpx.Client, key: str, group: str, keep_days: int) -> None:
    policy = {"kind": "audit", "group": group, "owner": key, "keep_days": keep_days}
    answer = api.put(POLICIES, json={**policy, "archive": False})
    assert answer.status_code == 200, answer.text


def group_keep(api: httpx.Client, settings: Settings, group: str) -> int:
    """The group's audit policy, else the default (what a shared day of the group keeps)."""
    for policy in api.get(POLICIES).json():
        if (policy["kind"], policy["group"], policy["owner"]) == ("audit", group, None):
            return int(policy["keep_days"])
    return settings.ingest.default_keep_days


def written(
    api: httpx.Client, client: httpx.Client, prefix: str, rows: int
) -> tuple[str, int, str]:
    """An owner of the first group with ``rows`` rows on each of DAYS, shared: key, id and
    group."""
    key, group = map_audit_owner(api, prefix)
    for day in DAYS:
        post_audit_rows(client, key, day, rows)
    ident = owner_id(api, "audit", key)
    assert ident is not None
    assert [placed_counts(api, ident, day) for day in DAYS] == [(rows, 0)] * len(DAYS)
    return key, ident, group


def test_a_shorter_policy_deletes_the_owners_rows_of_the_shared_days_its_group_keeps(
    client: httpx.Client, api: httpx.Client, settings: Settings
) -> None:
    tag = uuid.uuid4().hex[:6]
    short, short_id, group = written(api, client, f"short-{tag}", 5)
    _, other_id, _ = written(api, client, f"other-{tag}", 4)
    assert group_keep(api, settings, group) > 8
    set_policy(api, short, group, 8)
    # As of the day 9 days after the oldest of DAYS (the day DAYS was computed on, whatever
    # the clock says by now, across a midnight too): that day expires for the owner, the next
    # one does not.
    as_of = ["--as-of", (DAYS[0].date() + timedelta(days=9)).isoformat()]

    preview = run_cli(settings, "retention", "run", "--owner", short, *as_of, "--dry-run", "--json")
    assert preview.returncode == 0, preview.stderr
    planned = json.loads(preview.stdout)["shared_purges"]
    assert {(p["day"], p["rows"], p["outcome"]) for p in planned} == {
        (DAYS[0].date().isoformat(), 5, "would_purge")
    }, planned
    assert [placed_counts(api, short_id, day) for day in DAYS] == [
        (5, 0)
    ] * 3  # a dry run deletes none

    # Batches of 2 rows: the 5 rows take three.
    env = {"SHARDLOG_SHARED__DELETE_BATCH_ROWS": "2"}
    run = run_cli(settings, "retention", "run", "--owner", short, *as_of, "--json", env=env)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["status"] == "done" and report["shared_rows_purged"] == 5, report
    assert [placed_counts(api, short_id, day) for day in DAYS] == [(0, 0), (5, 0), (5, 0)]
    assert [placed_counts(api, other_id, day) for day in DAYS] == [(4, 0)] * 3

    second = run_cli(settings, "retention", "run", "--owner", short, *as_of, "--json")
    again = json.loads(second.stdout)
    assert again["shared_purges"] == [] and again["shared_rows_purged"] == 0


T = TypeVar("T")


def in_catalog(settings: Settings, work: Callable[[asyncpg.Pool, ShardPools], Awaitable[T]]) -> T:
    """``work`` with a catalog pool and the shards' pools of this process (opened, closed)."""

    async def run() -> T:
        metadata = await catalog_login.open_pool(settings)
        pools = ShardPools(settings.pools)
        try:
            await pools.reconcile(await store.load_snapshot(metadata))
            return await work(metadata, pools)
        finally:
            await pools.close()
            await metadata.close()

    return asyncio.run(run())


async def plan_of(
    metadata: asyncpg.Pool, pools: ShardPools, settings: Settings, as_of: date, day: date
) -> tuple[CatalogSnapshot, list[owner_shared.OwnerRule], list[shared_days.ExpiredShared]]:
    """What a run as of ``as_of`` would drop of ``day``'s shared tables, and the owners'
    differing policies (the runner's own first steps)."""
    snapshot = await store.load_snapshot(metadata)
    scope = inventory.Filter(kind="audit", first=day, last=day)
    found, _ = await shared_days.take(metadata, pools, snapshot, scope)
    default = settings.ingest.default_keep_days
    expired = shared_days.expired_shared(found, snapshot, as_of, date.max, default, "audit")
    return snapshot, await owner_shared.rules(metadata, snapshot, default, scope), expired


def sharing(settings: Settings) -> tuple[Any, Any]:
    fast = settings.shared.model_copy(
        update={"promote_settle_s": 0.0, "promote_lock_timeout_ms": 200}
    )
    return fast, settings.ingest


def kept_longer(
    api: httpx.Client, client: httpx.Client, settings: Settings, prefix: str
) -> tuple[str, int, date]:
    """An owner with 3 shared rows on each of DAYS and a policy 30 days longer than its
    group's: key, id, and the day a run finds the oldest of DAYS expired for the group and
    not for the owner."""
    key, ident, group = written(api, client, f"{prefix}-{uuid.uuid4().hex[:6]}", 3)
    keep = group_keep(api, settings, group)
    set_policy(api, key, group, keep + 30)
    return key, ident, DAYS[0].date() + timedelta(days=keep + 1)


def test_a_longer_policy_moves_the_owners_rows_before_its_shared_day_goes(
    client: httpx.Client, api: httpx.Client, settings: Settings
) -> None:
    longer, longer_id, as_of = kept_longer(api, client, settings, "longer")
    _, small_id, _ = written(api, client, f"small-{uuid.uuid4().hex[:6]}", 2)
    day = DAYS[0].date()

    async def dry_run(metadata: asyncpg.Pool, pools: ShardPools) -> dict[str, Any]:
        # Scoped to the day, as the runner's dry run: nothing is dropped by it.
        runner = RetentionRunner(
            metadata, pools, settings.retention, settings.ingest.default_keep_days
        )
        scope = inventory.Filter(kind="audit", first=day, last=day)
        snapshot = await store.load_snapshot(metadata)
        report = await runner.run(snapshot, RunOptions(as_of=as_of, dry_run=True, scope=scope))
        return report.to_json()

    planned = in_catalog(settings, dry_run)["shared_promotions"]
    assert [(p["owner"], p["rows"], p["outcome"]) for p in planned] == [
        (longer, 3, "would_promote")
    ], planned

    async def keep_longer(
        metadata: asyncpg.Pool, pools: ShardPools
    ) -> tuple[owner_shared.OwnerSharedReport, bool]:
        snapshot, rules, expired = await plan_of(metadata, pools, settings, as_of, day)
        assert [r for r in rules if not r.shorter and r.owner_id == longer_id]
        report = owner_shared.OwnerSharedReport()
        kept = await owner_shared.keep_longer(
            metadata, pools, snapshot, sharing(settings), rules, expired, as_of, report, False
        )
        return report, kept == expired

    report, unchanged = in_catalog(settings, keep_longer)
    assert [(p["owner"], p["outcome"]) for p in report.promotions] == [(longer, "promoted")]
    assert report.held == [] and unchanged  # the day may go whole now
    assert placed_counts(api, longer_id, DAYS[0]) == (
        0,
        3,
    )  # in its own table, which its policy keeps
    assert placed_counts(api, small_id, DAYS[0]) == (2, 0)  # a small owner's rows go with the day
    assert [placed_counts(api, longer_id, d) for d in DAYS[1:]] == [(3, 0)] * 2  # not expiring


def test_a_shared_day_whose_longer_owner_cannot_move_is_held(
    client: httpx.Client, api: httpx.Client, settings: Settings
) -> None:
    _, longer_id, as_of = kept_longer(api, client, settings, "stuck")
    day = DAYS[0].date()
    shards = catalog_shards(api)

    async def held_back(
        metadata: asyncpg.Pool, pools: ShardPools
    ) -> tuple[owner_shared.OwnerSharedReport, list[Any], list[Any]]:
        snapshot, rules, expired = await plan_of(metadata, pools, settings, as_of, day)
        # A transaction holding the owner-day's fence: the move's lock is never granted.
        holders = []
        for dsn in shards.values():
            try:
                connection = await asyncpg.connect(dsn, timeout=5)
            except (OSError, asyncpg.PostgresError):
                continue  # a shard another test stopped
            holders.append(connection)
            await connection.execute("BEGIN")
            fence = f'"{owner_days_table(day)}"'
            if await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", fence):
                await connection.execute(
                    f"SELECT 1 FROM {fence} WHERE owner_id = $1 FOR UPDATE", longer_id
                )
        try:
            report = owner_shared.OwnerSharedReport()
            kept = await owner_shared.keep_longer(
                metadata, pools, snapshot, sharing(settings), rules, expired, as_of, report, False
            )
        finally:
            for connection in holders:
                await connection.close()
        return report, kept, expired

    report, kept, expired = in_catalog(settings, held_back)
    held = [h for h in report.held if h["owner_id"] == longer_id]
    assert len(held) == 1 and held[0]["rows"] == 3, report.held
    assert "could not be moved" in held[0]["reason"]
    shard = held[0]["shard"]
    after = {(item.entry.shard, item.entry.day): item for item in kept}
    before = {(item.entry.shard, item.entry.day): item for item in expired}
    if (shard, day) in after:  # the day's flow table may still go: never the audit one
        assert "audit" not in after[(shard, day)].relations
        assert "owner_days" not in after[(shard, day)].relations
    assert "audit" in before[(shard, day)].relations
    assert placed_counts(api, longer_id, DAYS[0]) == (3, 0)  # nothing moved, nothing lost


ARCHIVED_DAY = past_day(11, 12)


def test_an_archived_shared_day_restores_one_owner_and_an_erase_rewrites_it(
    client: httpx.Client, api: httpx.Client, settings: Settings
) -> None:
    """A shared table dropped with an archive (its group's policy archives: the drop is
    taken here on the owners' shard-days alone): one file per shard-day with each row's owner
    and a manifest counting them; `shardlog restore` brings one owner's rows back into a day
    table of its own, as they were; `owner erase` writes the file again without the erased
    owner's rows."""
    tag = uuid.uuid4().hex[:6]
    kept, _ = map_audit_owner(api, f"restored-{tag}")
    gone, _ = map_audit_owner(api, f"erased-{tag}")
    post_audit_rows(client, kept, ARCHIVED_DAY, 3)
    post_audit_rows(client, gone, ARCHIVED_DAY, 2)
    kept_id, gone_id = owner_id(api, "audit", kept), owner_id(api, "audit", gone)
    assert kept_id is not None and gone_id is not None
    day = ARCHIVED_DAY.date()
    window = {
        "owner": kept,
        "from": (ARCHIVED_DAY - timedelta(hours=1)).isoformat(),
        "to": (ARCHIVED_DAY + timedelta(hours=1)).isoformat(),
    }
    before = search_items(api, "audit", window)
    assert [item["content"] for item in before] == [kept] * 3

    async def drop_archived(metadata: asyncpg.Pool, pools: ShardPools) -> list[Any]:
        snapshot = await store.load_snapshot(metadata)
        scope = inventory.Filter(kind="audit", first=day, last=day)
        found, _ = await shared_days.take(metadata, pools, snapshot, scope)
        holding = set()
        for entry in found:
            async with pools.reader(entry.shard, primary=True).acquire() as connection:
                table = shared_table("audit", day)
                if {kept_id, gone_id} & {
                    r["owner_id"]
                    for r in await connection.fetch(
                        f'SELECT DISTINCT owner_id FROM "{table}" WHERE owner_id = ANY($1)',
                        [kept_id, gone_id],
                    )
                }:
                    holding.add(entry.shard)
        dropper = SharedDropper(metadata, pools, settings.retention)
        results = []
        for entry in found:
            if entry.shard in holding:
                item = shared_days.ExpiredShared(entry, ("audit",), ("audit",), {}, ("audit",))
                results.append(await dropper.drop(snapshot, item))
        return results

    results = in_catalog(settings, drop_archived)
    assert results and all(r.outcome == "dropped" and r.archives for r in results), results
    assert search_items(api, "audit", window) == []  # dropped: nothing to find

    archive_dir = Path(settings.retention.archive_dir)
    manifests = archive.shared_manifests(archive_dir, "audit", day)
    assert sum(m.owners.get(str(kept_id), 0) for m in manifests) == 3
    assert sum(m.owners.get(str(gone_id), 0) for m in manifests) == 2
    assert all(m.columns[0] == "owner_id" and "created_xid" not in m.columns for m in manifests)

    restored = run_cli(settings, "restore", kept, day.isoformat(), "--json")
    assert restored.returncode == 0, restored.stderr
    assert json.loads(restored.stdout)["rows"] == 3
    after = search_items(api, "audit", window)
    strip = {"ref"}  # a ref names the table's layout; the rows themselves are as they were
    assert [{k: v for k, v in i.items() if k not in strip} for i in after] == [
        {k: v for k, v in i.items() if k not in strip} for i in before
    ]

    erased = run_cli(settings, "owner", "erase", gone, "--forget", "--json")
    assert erased.returncode == 0, erased.stderr
    rewritten = json.loads(erased.stdout)["archives_rewritten"]
    assert sum(entry["rows"] for entry in rewritten) == 2, rewritten
    for manifest in archive.shared_manifests(archive_dir, "audit", day):
        assert str(gone_id) not in manifest.owners
        path = archive.verify_shared(archive_dir, manifest)  # its checksum rewritten too
        with gzip.open(path, "rb") as lines:
            owners = [line.split(b"\t", 1)[0] for line in lines]
        assert str(gone_id).encode() not in owners
        assert len(owners) == manifest.rows
    assert (
        sum(
            m.owners.get(str(kept_id), 0)
            for m in archive.shared_manifests(archive_dir, "audit", day)
        )
        == 3
    )
