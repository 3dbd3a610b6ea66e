"""Shared tables made ahead of their days (issue 38, step 1; docs/architecture.md "Shared tables
for small owners"): made on every shard not marked down with the columns, indexes, owner and
grants of the design, once whatever the number of runs at once, registered in shared_tables,
made by `shardlog sharing ahead` and by a router with SHARDLOG_SHARED__ENABLED, and dropped by
retention when their day expires. Every test drops what it made."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import date, timedelta
from pathlib import Path

import asyncpg
import httpx
import pytest

from router import clock
from router.catalog import store
from router.catalog.snapshot import CatalogSnapshot
from router.db import catalog_login, roles
from router.db.names import owner_days_table, shared_table
from router.db.pools import ShardPools
from router.retention import inventory
from router.retention.runner import RetentionRunner, RunOptions
from router.settings import Settings
from router.sharing.ahead import ahead_days, make_ahead
from services.cluster import LocalCluster
from tests.support import (
    DENIED,
    another_router,
    drop_shared_days,
    eventually,
    expired_shared_day,
    refused,
    run_cli,
    running_router,
)

KINDS = ("audit", "flow")


def names_of(day: date) -> list[str]:
    return [shared_table("audit", day), shared_table("flow", day), owner_days_table(day)]


@pytest.fixture
async def metadata(api: httpx.Client, settings: Settings) -> AsyncIterator[asyncpg.Pool]:
    pool = await catalog_login.open_pool(settings)
    yield pool
    await pool.close()


@pytest.fixture
async def shards(
    metadata: asyncpg.Pool, settings: Settings
) -> AsyncIterator[tuple[CatalogSnapshot, ShardPools]]:
    snapshot = await store.load_snapshot(metadata)
    pools = ShardPools(settings.pools)
    await pools.reconcile(snapshot)
    yield snapshot, pools
    await pools.close()


@pytest.fixture
def session_shards(cluster: LocalCluster) -> dict[str, str]:
    """The session cluster's shards (always up): name -> superuser DSN."""
    return {instance.spec.name: instance.spec.dsn() for instance in cluster.shards}


@pytest.fixture
async def made_days(
    metadata: asyncpg.Pool, session_shards: dict[str, str]
) -> AsyncIterator[list[date]]:
    """Days whose shared tables a test makes: dropped, with their registry rows and
    coordinator children, afterwards."""
    days: list[date] = []
    yield days
    await drop_shared_days(metadata, session_shards, days)


@dataclass(frozen=True)
class World:
    metadata: asyncpg.Pool
    snapshot: CatalogSnapshot
    pools: ShardPools
    session_shards: dict[str, str]
    made_days: list[date]


@pytest.fixture
def world(
    metadata: asyncpg.Pool,
    shards: tuple[CatalogSnapshot, ShardPools],
    session_shards: dict[str, str],
    made_days: list[date],
) -> World:
    return World(metadata, *shards, session_shards, made_days)


async def relations_on(dsn: str, days: list[date]) -> set[str]:
    wanted = [name for day in days for name in names_of(day)]
    connection = await asyncpg.connect(dsn)
    try:
        rows = await connection.fetch(
            "SELECT relname FROM pg_class WHERE relname = ANY($1::text[]) AND relkind = 'r' "
            "AND relnamespace = 'public'::regnamespace",
            wanted,
        )
    finally:
        await connection.close()
    return {row["relname"] for row in rows}


async def registered(metadata: asyncpg.Pool, days: list[date]) -> set[tuple[str, date, str]]:
    rows = await metadata.fetch(
        "SELECT kind, day, shard FROM shared_tables WHERE day = ANY($1::date[])", days
    )
    return {(row["kind"], row["day"], row["shard"]) for row in rows}


async def test_two_runs_at_once_make_every_table_once_on_every_shard(
    world: World,
) -> None:
    metadata, snapshot, pools = world.metadata, world.snapshot, world.pools
    session_shards, made_days = world.session_shards, world.made_days
    days = ahead_days(clock.today(), 2)
    made_days.extend(days)
    first, second = await asyncio.gather(
        make_ahead(metadata, pools, snapshot, days), make_ahead(metadata, pools, snapshot, days)
    )
    for shard, dsn in session_shards.items():
        assert shard not in first.unreachable and shard not in second.unreachable
        expected = {name for day in days for name in names_of(day)}
        assert await relations_on(dsn, days) == expected
        made = [name for where, name in first.made + second.made if where == shard]
        assert sorted(made) == sorted(expected), "each table made by exactly one run"
        registrations = [
            (kind, day) for where, kind, day in first.registered + second.registered
            if where == shard
        ]  # fmt: skip
        assert sorted(registrations) == sorted((k, d) for k in KINDS for d in days)
    assert {(k, d, s) for k in KINDS for d in days for s in session_shards} <= await registered(
        metadata, days
    )
    again = await make_ahead(metadata, pools, snapshot, days)
    assert again.made == [] and again.registered == []


async def test_shared_tables_have_the_designed_columns_indexes_owner_and_grants(
    world: World,
) -> None:
    metadata, snapshot, pools = world.metadata, world.snapshot, world.pools
    session_shards, made_days = world.session_shards, world.made_days
    day = clock.today() + timedelta(days=1)
    made_days.append(day)
    await make_ahead(metadata, pools, snapshot, [day])
    shard, dsn = sorted(session_shards.items())[0]
    audit, flow, owner_days = names_of(day)
    superuser = await asyncpg.connect(dsn)
    try:
        owners = await superuser.fetch(
            "SELECT relname, pg_get_userbyid(relowner) AS owner FROM pg_class "
            "WHERE relname = ANY($1::text[])",
            [audit, flow, owner_days],
        )
        assert {row["owner"] for row in owners} == {roles.TABLES} and len(owners) == 3

        async def columns(table: str) -> list[str]:
            rows = await superuser.fetch(
                "SELECT attname FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0 "
                "AND NOT attisdropped ORDER BY attnum",
                table,
            )
            return [row["attname"] for row in rows]

        assert await columns(audit) == ["owner_id", "id", "ts", "content", "attrs", "created_xid"]
        assert (await columns(flow))[:3] == ["owner_id", "id", "src_ip"]
        assert await columns(owner_days) == ["kind", "owner_id", "promoted"]
        indexes = {
            row["indexdef"].split(" USING ", 1)[1]
            for row in await superuser.fetch(
                "SELECT indexdef FROM pg_indexes WHERE tablename = ANY($1::text[])",
                [audit, flow, owner_days],
            )
        }
        assert {
            "btree (owner_id, ts, id)",
            "btree (ts, owner_id, id)",
            "btree (owner_id, kind)",
            "btree (owner_id, src_ip, dst_ip, src_port, dst_port, proto) NULLS NOT DISTINCT",
            "btree (owner_id, first_seen, id)",
        } <= indexes
        assert any(index.startswith("btree (owner_id, ((id % (256)::bigint))") for index in indexes)
        for table in (audit, flow):
            increment = await superuser.fetchval(
                "SELECT s.seqincrement FROM pg_sequence s "
                "WHERE s.seqrelid = pg_get_serial_sequence($1, 'id')::regclass",
                table,
            )
            assert increment == 2
        for role, privilege, granted in (
            (roles.WRITER, "INSERT", True),
            (roles.WRITER, "SELECT", True),
            (roles.READER, "SELECT", True),
            (roles.READER, "INSERT", False),
            (roles.RETENTION, "SELECT", True),
            (roles.RETENTION, "DELETE", False),
        ):
            for table in (audit, flow, owner_days):
                assert (
                    await superuser.fetchval(
                        "SELECT has_table_privilege($1, $2, $3)", role, f'"{table}"', privilege
                    )
                    is granted
                ), (role, privilege, table)
        # A role of the shard's server that is none of shardlog's gets nothing.
        await superuser.execute("CREATE ROLE shared38_stranger NOLOGIN")
        try:
            await superuser.execute("SET ROLE shared38_stranger")
            for table in (audit, flow, owner_days):
                await refused(superuser, f'SELECT * FROM public."{table}"', DENIED)
                await refused(
                    superuser, f'INSERT INTO public."{table}" (owner_id) VALUES (1)', DENIED
                )
        finally:
            await superuser.execute("RESET ROLE")
            await superuser.execute("DROP ROLE shared38_stranger")
    finally:
        await superuser.close()
    # The writer inserts (odd ids, from the table's own identity); the reader reads them. Rolled
    # back: the tables stay empty.
    async with pools.writer(shard).acquire() as writer:
        transaction = writer.transaction()
        await transaction.start()
        try:
            ids = [
                await writer.fetchval(
                    f'INSERT INTO "{audit}" (owner_id, ts, content) VALUES ($1, now(), $2) '
                    "RETURNING id",
                    7,
                    f"row {i}",
                )
                for i in range(3)
            ]
            assert all(i % 2 == 1 for i in ids) and len(set(ids)) == 3, ids
            await writer.execute(
                f'INSERT INTO "{owner_days}" (kind, owner_id) VALUES ($1, $2)', "audit", 7
            )
            flow_id = await writer.fetchval(
                f'INSERT INTO "{flow}" (owner_id, src_ip, dst_ip, src_port, dst_port, '
                "ip_version, proto, bytes, packets, first_seen, last_seen) "
                "VALUES (7, '10.0.0.1', '10.0.0.2', 1, 2, 4, 6, 10, 1, now(), now()) RETURNING id"
            )
            assert flow_id % 2 == 1
        finally:
            await transaction.rollback()
    async with pools.reader(shard, primary=True).acquire() as reader:
        for table in (audit, flow, owner_days):
            assert await reader.fetchval(f'SELECT count(*) FROM "{table}"') == 0


async def test_a_shard_marked_down_is_skipped_and_made_by_the_next_run(
    world: World,
) -> None:
    metadata, snapshot, pools = world.metadata, world.snapshot, world.pools
    session_shards, made_days = world.session_shards, world.made_days
    day = clock.today() + timedelta(days=2)
    made_days.append(day)
    down = sorted(session_shards)[0]
    marked = replace(
        snapshot,
        shards={**snapshot.shards, down: replace(snapshot.shards[down], state="down")},
    )
    skipped = await make_ahead(metadata, pools, marked, [day])
    assert down not in {shard for shard, _ in skipped.made} and down not in skipped.unreachable
    assert await relations_on(session_shards[down], [day]) == set()
    assert {shard for _, _, shard in await registered(metadata, [day])} >= set(session_shards) - {
        down
    }
    assert down not in {shard for _, _, shard in await registered(metadata, [day])}
    back = await make_ahead(metadata, pools, snapshot, [day])
    assert {shard for shard, _ in back.made} == {down}
    assert sorted(name for _, name in back.made) == sorted(names_of(day))
    assert await relations_on(session_shards[down], [day]) == set(names_of(day))
    assert (("audit", day, down) in await registered(metadata, [day])) and (
        ("flow", day, down) in await registered(metadata, [day])
    )


async def test_the_cli_makes_them_whatever_the_setting_says_and_audits_it(
    api: httpx.Client,
    metadata: asyncpg.Pool,
    settings: Settings,
    session_shards: dict[str, str],
    made_days: list[date],
) -> None:
    made_days.extend(ahead_days(clock.today(), 2))  # the CLI's days, or a day on past midnight
    made_days.append(made_days[-1] + timedelta(days=1))
    env = {"SHARDLOG_SHARED__ENABLED": "false"}
    result = run_cli(settings, "sharing", "ahead", "--days", "1", "--json", env=env)
    assert result.stdout, result.stderr
    report = json.loads(result.stdout)
    days = [date.fromisoformat(day) for day in report["days"]]
    assert len(days) == 2 and days[1] - days[0] == timedelta(days=1)
    for shard, dsn in session_shards.items():
        assert shard not in report["unreachable"]
        assert await relations_on(dsn, days) == {name for day in days for name in names_of(day)}
        assert {m["table"] for m in report["made"] if m["shard"] == shard} == {
            name for day in days for name in names_of(day)
        }
    assert {(k, d, s) for k in KINDS for d in days for s in session_shards} <= await registered(
        metadata, days
    )
    audit = await asyncio.to_thread(
        api.get,
        "/v1/audit/search",
        params={"owner": "shardlog.admin", "q": "sharing.ahead", **window_of(days), "limit": 5},
    )
    assert audit.status_code == 200 and audit.json()["items"], audit.text
    again = run_cli(settings, "sharing", "ahead", "--days", "1", "--json", env=env)
    assert again.stdout, again.stderr
    remade = [m["table"] for m in json.loads(again.stdout)["made"] if m["shard"] in session_shards]
    # Nothing of the first run's days is made again (a run past midnight makes a new day's).
    assert not set(remade) & {name for day in days for name in names_of(day)}


def window_of(days: list[date]) -> dict[str, str]:
    """A window around the CLI's run: its first day's start to a day after its last."""
    return {
        "from": f"{days[0] - timedelta(days=1)}T00:00:00Z",
        "to": f"{days[-1] + timedelta(days=1)}T00:00:00Z",
    }


async def test_a_router_with_sharing_enabled_makes_them_at_start(
    settings: Settings,
    session_shards: dict[str, str],
    made_days: list[date],
    tmp_path: Path,
) -> None:
    made_days.extend(ahead_days(clock.today(), 1))
    env = {"SHARDLOG_SHARED__ENABLED": "true", "SHARDLOG_SHARED__DAYS_AHEAD": "0"}

    def made_today() -> bool:
        today = clock.today()
        if today not in made_days:
            made_days.append(today)
        found = [asyncio.run(relations_on(dsn, [today])) for dsn in session_shards.values()]
        return all(names == set(names_of(today)) for names in found)

    with running_router(another_router(settings, tmp_path / "router", env)):
        await asyncio.to_thread(eventually, made_today, 30.0, 0.2)


async def test_retention_drops_an_expired_shared_day_and_its_dry_run_lists_it(
    world: World, settings: Settings
) -> None:
    metadata, snapshot, pools = world.metadata, world.snapshot, world.pools
    session_shards, made_days = world.session_shards, world.made_days
    default_keep = settings.ingest.default_keep_days
    day = expired_shared_day(snapshot, default_keep, 30)
    made_days.append(day)
    await make_ahead(metadata, pools, snapshot, [day])
    expected = {(shard, day.isoformat()) for shard in session_shards}

    result = run_cli(settings, "retention", "run", "--dry-run", "--json")
    assert result.stdout, result.stderr
    preview = json.loads(result.stdout)
    listed = [d for d in preview["shared_drops"] if d["day"] == day.isoformat()]
    assert {(d["shard"], d["day"]) for d in listed} >= expected
    for drop in listed:
        assert drop["outcome"] == "would_drop" and drop["kinds"] == ["audit", "flow"]
        assert drop["tables"] == names_of(day)
    assert preview["shared_days_total"] >= len(expected)
    for dsn in session_shards.values():
        assert await relations_on(dsn, [day]) == set(names_of(day))
    assert len(await registered(metadata, [day])) >= 2 * len(session_shards)

    runner = RetentionRunner(metadata, pools, settings.retention, default_keep)
    report = await runner.run(
        snapshot,
        RunOptions(trigger="cli", scope=inventory.Filter(first=day, last=day)),
    )
    assert report.status == "done", report.to_json()
    assert report.drops == []
    dropped = {(d["shard"], d["day"]) for d in report.shared_drops if d["outcome"] == "dropped"}
    assert dropped >= expected
    assert report.totals()["shared_days_dropped"] >= len(expected)
    for dsn in session_shards.values():
        assert await relations_on(dsn, [day]) == set()
    assert await registered(metadata, [day]) == set()


async def test_retention_drops_only_shared_tables_through_its_function(world: World) -> None:
    shard = sorted(world.session_shards)[0]
    day = date(2001, 2, 3)  # no day of anybody's
    world.made_days.append(day)
    await make_ahead(world.metadata, world.pools, world.snapshot, [day])
    audit = f'"{shared_table("audit", day)}"'
    async with world.pools.retention(shard).acquire() as retention:
        for sql in (
            f"DROP TABLE {audit}",
            "SELECT shardlog_drop_shared_table('ingest_ledger')",
            "SELECT shardlog_drop_shared_table('shard_identity')",
            "SELECT shardlog_drop_shared_table('pg_catalog.pg_class')",
            f"SELECT shardlog_drop_day_table('{audit}')",
        ):
            await refused(retention, sql)
    async with world.pools.reader(shard, primary=True).acquire() as reader:
        await refused(reader, f"SELECT shardlog_drop_shared_table('{audit}')")
    # (The writer is a member of shardlog_tables, which owns the shared tables: it may drop
    # them anyway, as it may day tables.)
    async with world.pools.writer(shard).acquire() as writer:
        # Named like a shared table, owned by the writer itself: no shared table.
        impostor = shared_table("flow", date(2001, 2, 4))
        await writer.execute(f'CREATE TABLE "{impostor}" (x int)')
        try:
            async with world.pools.retention(shard).acquire() as retention:
                await refused(retention, f"SELECT shardlog_drop_shared_table('{impostor}')")
        finally:
            await writer.execute(f'DROP TABLE "{impostor}"')
    async with world.pools.retention(shard).acquire() as retention:
        await retention.execute("SELECT shardlog_drop_shared_table($1::regclass)", audit)
    assert shared_table("audit", day) not in await relations_on(world.session_shards[shard], [day])
