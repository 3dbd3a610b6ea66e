"""The compaction engine (docs/architecture.md, "Compacted days"): a closed audit day is
copied into segments under one snapshot and verified, switched in the registry, and its heap
cleared; each step leaves the owner-day whole, a stop between steps is completed by the next
run, a late write is stored once and found, and a copy that does not verify keeps nothing.
Rows are written through the router and read back through its search; the oracle is the list
of rows written."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from bench.shard_view import catalog_shards, day_tables, owner_id, shard_sql
from router.cli.lifecycle import context
from router.compaction import statements
from router.compaction.runner import Compactor, Scope
from router.db.names import day_table, parse_day_table
from router.settings import Settings
from tests.integration import test_retention as retention_helpers
from tests.integration.test_search import post
from tests.support import (
    another_router,
    cli_env,
    clock_now,
    kill_once_waiting,
    locks_held,
    past_day,
    post_audit_rows,
    recent_window,
    run_cli,
    running_router,
    sharing_client,
    statements_gone,
)

DAY = past_day(4, 0)
WINDOW = {"from": DAY.isoformat(), "to": (DAY + timedelta(days=1)).isoformat()}


def write(api: httpx.Client, owner: str, n: int, first: int = 0) -> list[str]:
    """``n`` rows of ``owner`` over the day, in several requests (so on several shards)."""
    contents = [
        f"{owner} line {i} {'rare' if i % 17 == 0 else 'plain'}" for i in range(first, first + n)
    ]
    records = [
        {"owner": owner, "ts": (DAY + timedelta(seconds=37 * i)).isoformat(), "content": c}
        for i, c in zip(range(first, first + n), contents, strict=True)
    ]
    for start in range(0, n, 50):
        post(api, "/v1/audit", records[start : start + 50])
    return contents


def found(api: httpx.Client, owner: str, **params: Any) -> list[str]:
    """Every content the router's search returns for ``owner`` on the day, page after page."""
    contents: list[str] = []
    cursor = None
    while True:
        query = {"owner": owner, **WINDOW, "limit": 40, **params}
        if cursor:
            query["cursor"] = cursor
        response = api.get("/v1/audit/search", params=query)
        assert response.status_code == 200, response.text
        page = response.json()
        contents += [item["content"] for item in page["items"]]
        cursor = page.get("next_cursor")
        if not cursor:
            return contents


def counted(api: httpx.Client, owner: str) -> int:
    response = api.get(
        "/v1/audit/search", params={"owner": owner, **WINDOW, "count": "exact", "limit": 1}
    )
    assert response.status_code == 200, response.text
    return int(response.json()["count"]["value"])


def compact(settings: Settings, *args: str) -> dict[str, Any]:
    result = run_cli(settings, "compact", "--json", *args)
    assert result.returncode in (0, 1), result.stderr
    return dict(json.loads(result.stdout))


def heap_rows(api: httpx.Client, owner: str) -> int:
    ident = owner_id(api, "audit", owner)
    assert ident is not None
    dsns = catalog_shards(api)
    return sum(
        int(shard_sql(dsns[shard], f"SELECT count(*) FROM {table}"))
        for shard, tables in day_tables(api, "audit", ident).items()
        for table in tables
    )


@pytest.fixture
def owner() -> Iterator[str]:
    yield f"compact-{uuid.uuid4().hex[:10]}"


def states(report: dict[str, Any], owner: str) -> set[str]:
    return {o["state"] for o in report["owner_days"] if o["owner"] == owner}


def test_a_closed_day_is_copied_switched_and_cleared(api, settings, owner) -> None:
    written = write(api, owner, 230)
    listed = compact(settings, "--dry-run", "--owner", owner)
    assert states(listed, owner) == {"copy"}
    assert heap_rows(api, owner) == 230  # a dry run changes nothing

    done = compact(settings, "--owner", owner, "--day", DAY.date().isoformat(), "--clear-now")
    days = [o for o in done["owner_days"] if o["owner"] == owner]
    assert days and all(o["steps"] == ["copy", "switch", "clear"] for o in days), days
    assert {o["state"] for o in days} == {"done"}
    assert sum(o["rows"] for o in days) == 230
    assert all(0 < o["packed_bytes"] < o["heap_bytes"] for o in days)
    assert heap_rows(api, owner) == 0
    assert sorted(found(api, owner)) == sorted(written)
    assert found(api, owner, q="rare") == [c for c in written if "rare" in c]
    assert counted(api, owner) == 230
    # Done is done: another run takes no step.
    again = compact(settings, "--owner", owner)
    assert all(not o["steps"] for o in again["owner_days"]) and states(again, owner) == {"done"}


def test_a_day_that_has_not_closed_is_left_alone(api, settings, owner) -> None:
    today = clock_now().replace(minute=0, second=0, microsecond=0)
    post(api, "/v1/audit", [{"owner": owner, "ts": today.isoformat(), "content": "today"}])
    report = compact(settings, "--owner", owner, "--clear-now")
    assert states(report, owner) == {"open"}
    assert all(not o["steps"] for o in report["owner_days"])


def test_each_stop_between_steps_keeps_every_row_once(api, settings, owner) -> None:
    """A run stopped after the copy, then after the switch: the search answers the same at
    each stop, and the next run completes the owner-day."""
    written = sorted(write(api, owner, 120))
    ident = owner_id(api, "audit", owner)
    assert ident is not None
    located = [
        (shard, parse_day_table(name))
        for shard, names in day_tables(api, "audit", ident).items()
        for name in names
    ]

    async def copy_only() -> None:
        async with context(settings) as ctx:
            compactor = Compactor(ctx.metadata, ctx.pools, settings.compaction)
            for shard, table in located:
                assert table is not None
                await compactor._attempts("copy", shard, table)

    asyncio.run(copy_only())
    # Copied, not switched: the rows are in the heap and the segments; searches read the heap.
    assert states(compact(settings, "--dry-run", "--owner", owner), owner) == {"switch"}
    assert sorted(found(api, owner)) == written and counted(api, owner) == 120

    # Switched, not cleared (the clear waits CLEAR_AFTER_S): searches read the segments and
    # only the heap rows the copy did not see.
    assert states(compact(settings, "--owner", owner), owner) == {"wait"}
    assert heap_rows(api, owner) == 120
    assert sorted(found(api, owner)) == written and counted(api, owner) == 120

    late = write(api, owner, 3, first=1000)  # late rows, after the switch
    assert sorted(found(api, owner)) == sorted(written + late) and counted(api, owner) == 123

    assert states(compact(settings, "--owner", owner, "--clear-now"), owner) == {"done"}
    assert heap_rows(api, owner) == 3  # the late rows stay in the heap, and are found
    assert sorted(found(api, owner)) == sorted(written + late) and counted(api, owner) == 123
    assert found(api, owner, order="desc") == sorted(
        found(api, owner), key=lambda c: -int(c.split()[2])
    )


def test_a_copy_that_does_not_verify_keeps_nothing(api, settings, owner, monkeypatch) -> None:
    written = sorted(write(api, owner, 40))
    ident = owner_id(api, "audit", owner)
    assert ident is not None
    shard, names = next(iter(day_tables(api, "audit", ident).items()))
    table = parse_day_table(names[0])
    assert table is not None
    honest = statements.copy_sql

    def losing_one(table_: Any) -> str:  # a codec that would lose the day's last row
        return honest(table_).replace(
            f"FROM {table_.quoted} WINDOW",
            f"FROM {table_.quoted} WHERE id <> (SELECT max(id) FROM {table_.quoted}) WINDOW",
        )

    monkeypatch.setattr(statements, "copy_sql", losing_one)

    async def attempt() -> Any:
        async with context(settings) as ctx:
            return await Compactor(ctx.metadata, ctx.pools, settings.compaction).compact_owner_day(
                table, shard, clear_now=True
            )

    outcome = asyncio.run(attempt())
    assert outcome.error and "nothing was kept" in outcome.error
    assert not outcome.steps
    dsn = catalog_shards(api)[shard]
    assert (
        shard_sql(dsn, f"SELECT count(*) FROM compacted_days WHERE owner_id = {ident}").strip()
        == "0"
    )
    assert sorted(found(api, owner)) == written
    # The failure is kept: listed as failed (with its step, error and count) until a run
    # takes the owner-day further.
    asyncio.run(attempt())
    listed = api.get("/v1/admin/compaction", params={"owner": owner, "failed": "true"}).json()
    failed = [o for o in listed["owner_days"] if o["shard"] == shard]
    assert len(failed) == 1, listed
    assert failed[0]["state"] == "failed" and failed[0]["failed_step"] == "copy"
    assert failed[0]["failures"] == 2 and "nothing was kept" in failed[0]["error"]
    assert failed[0]["first_failed_at"] <= failed[0]["last_failed_at"]
    assert states(compact(settings, "--dry-run", "--owner", owner, "--failed"), owner) == {"failed"}

    monkeypatch.setattr(statements, "copy_sql", honest)
    retried = compact(settings, "--owner", owner, "--failed", "--clear-now")
    assert states(retried, owner) == {"done"}, json.dumps(retried["owner_days"])
    assert states(compact(settings, "--dry-run", "--owner", owner), owner) == {"done"}
    listed = api.get("/v1/admin/compaction", params={"owner": owner, "failed": "true"}).json()
    assert listed["owner_days"] == []
    assert sorted(found(api, owner)) == written


def test_a_throttled_run_keeps_to_its_rows_per_second_and_compacts_everything(
    api, settings, owner
) -> None:
    """SHARDLOG_COMPACTION__MAX_ROWS_PER_S: a run over N rows at a limit of R rows a second
    takes at least N / R seconds (its own time, timed around the run alone), and still takes
    every owner-day to done with every row found."""
    rows, limit = 300, 200.0
    written = sorted(write(api, owner, rows))
    ident = owner_id(api, "audit", owner)
    assert ident is not None
    throttled = settings.compaction.model_copy(update={"max_rows_per_s": limit})

    async def throttled_run() -> tuple[float, Any]:
        async with context(settings) as ctx:
            compactor = Compactor(ctx.metadata, ctx.pools, throttled)
            started = time.monotonic()
            report = await compactor.run(
                ctx.snapshot, Scope(day=DAY.date(), owner_ids=frozenset({ident})), clear_now=True
            )
            return time.monotonic() - started, report

    took, report = asyncio.run(throttled_run())
    assert not report.failed and {o.state for o in report.owner_days} == {"done"}
    assert sum(o.rows for o in report.owner_days) == rows
    assert took >= rows / limit, took
    assert heap_rows(api, owner) == 0
    assert sorted(found(api, owner)) == written


def test_owner_days_of_a_shard_go_in_batches_and_a_failed_batch_one_by_one(api, settings) -> None:
    """BATCH_OWNER_DAYS: a shard's owner-days are copied in batches, one transaction (one
    snapshot) each, in the survey's order; a batch holding an owner-day whose heap another
    transaction has locked fails whole, and its owner-days are taken one by one: that one
    fails (and is recorded), the others are done. Every row is found throughout, and the
    next run, the lock gone, completes the day."""
    tag = uuid.uuid4().hex[:8]
    owners = [f"batch-{tag}-{k}" for k in range(10)]
    written = {o: write(api, o, 51) for o in owners}  # two requests each: one or two shards
    ids = {o: owner_id(api, "audit", o) for o in owners}
    dsns = catalog_shards(api)
    on_shard: dict[str, list[int]] = {}
    for ident in ids.values():
        assert ident is not None
        for shard in day_tables(api, "audit", ident):
            on_shard.setdefault(shard, []).append(ident)
    busiest = max(on_shard, key=lambda shard: len(on_shard[shard]))
    assert len(on_shard[busiest]) >= 4, on_shard
    locked = sorted(on_shard[busiest])[1]  # in the first batch of its shard
    size = 3
    batched = settings.compaction.model_copy(
        update={"batch_owner_days": size, "attempts": 1, "lock_timeout_ms": 200}
    )
    scope = Scope(day=DAY.date(), owner_ids=frozenset(i for i in ids.values() if i is not None))

    async def run_beside_a_lock() -> Any:
        holder = await asyncpg.connect(dsns[busiest])
        try:
            async with holder.transaction():
                table = day_table("audit", locked, DAY.date())
                await holder.execute(f"LOCK TABLE {table.quoted} IN ACCESS EXCLUSIVE MODE")
                async with context(settings) as ctx:
                    compactor = Compactor(ctx.metadata, ctx.pools, batched)
                    return await compactor.run(ctx.snapshot, scope, clear_now=True)
        finally:
            await holder.close()

    report = asyncio.run(run_beside_a_lock())
    failed = [(o.shard, o.table.owner_id) for o in report.failed]
    assert failed == [(busiest, locked)], report.summary()
    assert all(
        o.state == "done" and o.steps == ["copy", "switch", "clear"]
        for o in report.owner_days
        if o.table.owner_id != locked or o.shard != busiest
    )
    for owner in owners:
        assert sorted(found(api, owner)) == sorted(written[owner])

    # The oracle of the batches: each shard's owner-ids in order, cut every `size`; one
    # snapshot per batch, but the failed batch's owner-days each their own.
    for shard, idents in on_shard.items():
        rows = shard_sql(
            dsns[shard],
            "SELECT owner_id, snapshot FROM compacted_days WHERE kind = 'audit' "
            f"AND day = DATE '{DAY.date().isoformat()}' "
            f"AND owner_id IN ({', '.join(str(i) for i in idents)})",
        )
        snapshot_of = dict(line.split("|", 1) for line in rows.splitlines())
        ordered = sorted(idents)
        for start in range(0, len(ordered), size):
            batch = ordered[start : start + size]
            snapshots = [snapshot_of.get(str(i)) for i in batch]
            if shard == busiest and locked in batch:
                assert str(locked) not in snapshot_of
                kept = [s for s in snapshots if s is not None]
                assert len(set(kept)) == len(kept) == len(batch) - 1, snapshots
            else:
                assert len(set(snapshots)) == 1 and snapshots[0] is not None, snapshots

    async def run_again() -> Any:
        async with context(settings) as ctx:
            return await Compactor(ctx.metadata, ctx.pools, batched).run(
                ctx.snapshot, scope, clear_now=True
            )

    again = asyncio.run(run_again())
    assert not again.failed and {o.state for o in again.owner_days} == {"done"}
    for owner in owners:
        assert heap_rows(api, owner) == 0
        assert sorted(found(api, owner)) == sorted(written[owner])


def test_the_admin_listing_pages_through_every_owner_day(api, settings, owner) -> None:
    write(api, owner, 30)
    others = [f"{owner}-{n}" for n in range(3)]
    for other in others:
        write(api, other, 10)
    whole = api.get("/v1/admin/compaction", params={"day": DAY.date().isoformat()}).json()
    assert whole["next_after"] is None
    paged, after = [], None
    while True:
        query: dict[str, Any] = {"day": DAY.date().isoformat(), "limit": 2}
        if after:
            query["after"] = after
        page = api.get("/v1/admin/compaction", params=query).json()
        assert len(page["owner_days"]) <= 2
        paged += page["owner_days"]
        after = page["next_after"]
        if after is None:
            break
    key = lambda o: (o["owner"], o["shard"])  # noqa: E731
    assert sorted(map(key, paged)) == sorted(map(key, whole["owner_days"]))
    assert len(paged) == len(whole["owner_days"])
    for bad, status in (
        ("nonsense", 422),
        ("2026-11-01/audit/x/shard01", 422),
        ("2026-11-01/1/shard01", 422),
        ("2026-13-01/audit/1/shard01", 400),
        (f"2026-11-01/flow/{2**63}/shard01", 400),
    ):
        refused = api.get("/v1/admin/compaction", params={"after": bad})
        assert refused.status_code == status, refused.text
        assert refused.json()["error"]["field"] == "after"


def test_retention_archives_a_compacted_day_whole_and_restore_brings_it_back(api, settings) -> None:
    key, group = retention_helpers.new_owner(api, archive=True)
    retention_helpers.write(api, key, 6, rows=150, content=retention_helpers.HOSTILE)
    retention_helpers.write(api, key, 0)
    original = retention_helpers.search_all(api, key)
    day = (retention_helpers.TODAY - timedelta(days=6)).isoformat()
    done = compact(settings, "--owner", key, "--day", day, "--clear-now")
    assert {o["state"] for o in done["owner_days"]} == {"done"}
    assert retention_helpers.search_all(api, key) == original

    retention_helpers.set_policy(api, key, group, 3, archive=True)
    code, report = retention_helpers.retention(settings, key)
    assert code == 0, report
    dropped = [d for d in report["drops"] if d["outcome"] == "dropped"]
    assert dropped and sum(d["rows"] for d in dropped) == 150
    ident = owner_id(api, "audit", key)
    compact_day = day.replace("-", "")
    table = f"audit_o{ident}_{compact_day}"
    for shard, dsn in catalog_shards(api).items():
        left = shard_sql(
            dsn,
            f"SELECT count(*) FROM compacted_days WHERE owner_id = {ident}; "
            f"SELECT count(*) FROM pg_class WHERE relname IN ('{table}', '{table}_all'); "
            f"SELECT count(*) FROM pg_class WHERE relname = 'audit_segments_{compact_day}'; "
            f"SELECT count(*) FROM compacted_days WHERE kind = 'audit' AND day = '{day}'",
        ).split()
        # The owner's day, its view and its segments are gone; the day's segment table with
        # them unless another owner of that day is compacted on this shard (another test's).
        others = int(left[3])
        assert left[:3] == ["0", "0", "1" if others else "0"], (shard, left)
    assert len(retention_helpers.search_all(api, key)) == 40

    restored = run_cli(settings, "restore", key, day, "--json")
    assert restored.returncode == 0, restored.stderr
    assert json.loads(restored.stdout)["rows"] == 150
    assert retention_helpers.search_all(api, key) == original


def test_a_registry_rebuilt_by_sync_keeps_the_compacted_layout(api, settings, owner) -> None:
    written = sorted(write(api, owner, 60))
    compact(settings, "--owner", owner, "--clear-now")
    ident = owner_id(api, "audit", owner)
    shard_sql(settings.metadata_dsn(), f"DELETE FROM day_tables WHERE owner_id = {ident}")
    assert found(api, owner) == []
    result = run_cli(settings, "tables", "sync")
    assert result.returncode == 0, result.stderr
    assert sorted(found(api, owner)) == written
    assert sorted(found(api, owner, backend="fdw")) == written


def test_the_fdw_backend_reads_a_compacted_day_through_its_view(api, settings, owner) -> None:
    written = write(api, owner, 90)
    before = {f: found(api, owner, backend=f) for f in ("fanout", "fdw")}
    compact(settings, "--owner", owner, "--clear-now")
    late = write(api, owner, 2, first=500)
    for backend in ("fanout", "fdw"):
        assert found(api, owner, backend=backend) == sorted(
            written + late, key=lambda c: int(c.split()[2])
        )
    assert before["fanout"] == before["fdw"]


def test_the_admin_api_lists_what_the_cli_does(api, settings, owner) -> None:
    write(api, owner, 20)
    listed = api.get("/v1/admin/compaction", params={"owner": owner})
    assert listed.status_code == 200, listed.text
    assert {o["state"] for o in listed.json()["owner_days"]} == {"copy"}
    assert listed.json() == compact(settings, "--dry-run", "--owner", owner)
    compact(settings, "--owner", owner, "--clear-now")
    after = api.get("/v1/admin/compaction", params={"owner": owner, "day": DAY.date().isoformat()})
    assert {o["state"] for o in after.json()["owner_days"]} == {"done"}
    assert (
        api.get("/v1/admin/compaction", params={"owner": "nobody-" + owner}).json()["owner_days"]
        == []
    )


def test_a_run_killed_inside_its_copy_leaves_nothing_and_the_next_completes(
    api, settings, owner
) -> None:
    """kill -9 of `shardlog compact` while its copy waits inside its transaction: nothing of
    the copy stays, the rows are found once, and the next run compacts the owner-day."""
    written = sorted(write(api, owner, 80))
    ident = owner_id(api, "audit", owner)
    assert ident is not None
    shard, names = next(iter(day_tables(api, "audit", ident).items()))
    dsn = catalog_shards(api)[shard]
    segments = f"audit_segments_{DAY:%Y%m%d}"
    # The day's segment table exists; a lock on it holds the copy inside its transaction,
    # before its INSERT can run.
    table = parse_day_table(names[0])
    assert table is not None
    shard_sql(dsn, "SET ROLE shardlog_tables; " + "; ".join(statements.segment_table_ddl(table)))
    with locks_held([dsn], segments):
        cli = subprocess.Popen(
            [sys.executable, "-m", "router.cli", "compact", "--owner", owner, "--clear-now"],
            env={**cli_env(settings), "SHARDLOG_COMPACTION__LOCK_TIMEOUT_MS": "60000"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        kill_once_waiting(cli, [dsn], f'%INSERT INTO "{segments}"%')
    statements_gone([dsn], f'%INSERT INTO "{segments}"%')

    assert (
        shard_sql(dsn, f"SELECT count(*) FROM {segments} WHERE owner_id = {ident}").strip() == "0"
    )
    assert states(compact(settings, "--dry-run", "--owner", owner), owner) <= {
        "copy",
        "switch",
        "wait",
        "done",
    }
    assert sorted(found(api, owner)) == written
    rerun = compact(settings, "--owner", owner, "--clear-now")
    assert states(rerun, owner) == {"done"}, [o["error"] for o in rerun["owner_days"]]
    assert names  # the owner-day the copy was held on


def test_the_routers_job_compacts_closed_days_once_across_routers(
    api, settings, owner, tmp_path
) -> None:
    """Two routers with the job on: the owner-day is compacted in the background, and the
    shard-days of small owners written shared on the same day after it, each step taken
    once (the run lock), and every row found. Only days 27 or more days old close for them
    (CLOSED_AFTER_S of 26 days): nothing another test wrote."""
    old_day = past_day(27, 0)
    records = [
        {
            "owner": owner,
            "ts": (old_day + timedelta(seconds=11 * i)).isoformat(),
            "content": f"old {i}",
        }
        for i in range(150)
    ]
    for start in range(0, 150, 50):
        post(api, "/v1/audit", records[start : start + 50])
    window = {"from": old_day.isoformat(), "to": (old_day + timedelta(days=1)).isoformat()}
    env = {
        "SHARDLOG_COMPACTION__ENABLED": "true",
        "SHARDLOG_COMPACTION__INTERVAL_S": "0.3",
        "SHARDLOG_COMPACTION__CLEAR_AFTER_S": "0",
        "SHARDLOG_COMPACTION__CLOSED_AFTER_S": str(26 * 86400),
    }
    small = [f"{owner}-small{n}" for n in range(3)]
    routers = [another_router(settings, tmp_path / f"router{n}", env) for n in range(2)]
    with sharing_client(settings, tmp_path / "sharing", api) as sharing:
        for key in small:
            post_audit_rows(sharing, key, old_day + timedelta(hours=2), 5)
        small_before = [found(api, key, **window) for key in small]
        assert all(len(rows) == 5 for rows in small_before), small_before
        with running_router(routers[0]), running_router(routers[1]):
            deadline = time.monotonic() + 60
            while True:
                state = api.get("/v1/admin/compaction", params={"owner": owner}).json()
                shared = api.get(
                    "/v1/admin/compaction", params={"day": old_day.date().isoformat()}
                ).json()["shard_days"]
                done = {o["state"] for o in state["owner_days"]} == {"done"}
                if done and shared and {d["state"] for d in shared} == {"done"}:
                    break
                assert time.monotonic() < deadline, (state, shared)
                time.sleep(0.1)
            metrics = [httpx.get(f"{r.url}/metrics").text for r in routers]
        assert [found(api, key, **window) for key in small] == small_before
    owner_days = len(state["owner_days"])

    def total(name: str, step: str | None = None) -> float:
        label = f'{{step="{step}"}}' if step else ""
        return sum(
            float(line.split()[-1])
            for text in metrics
            for line in text.splitlines()
            if line.startswith(f"{name}{label} ")
        )

    # Only this owner's days are old enough for these routers to copy: each copy and switch
    # once per owner-day (they also clear what other tests left switched and waiting).
    for step in ("copy", "switch"):
        assert total("shardlog_compaction_steps_total", step) == owner_days
    assert total("shardlog_compaction_steps_total", "clear") >= owner_days
    assert total("shardlog_compaction_rows_total") == 150
    assert total("shardlog_compaction_failures_total") == 0
    for step in ("copy", "switch", "clear"):
        assert total("shardlog_compaction_shared_steps_total", step) == len(shared), metrics
    assert total("shardlog_compaction_shared_rows_total") == 15
    assert total("shardlog_compaction_shared_failures_total") == 0
    assert sum(d["rows"] for d in shared) == 15, shared
    assert heap_rows(api, owner) == 0
    items = api.get("/v1/audit/search", params={"owner": owner, **window, "limit": 1000}).json()
    assert [i["content"] for i in items["items"]] == [f"old {i}" for i in range(150)]
    audit = api.get(
        "/v1/audit/search",
        params={"owner": "shardlog.admin", "q": "compaction.run", **recent_window(), "limit": 5},
    )
    assert audit.status_code == 200 and audit.json()["items"], audit.text
