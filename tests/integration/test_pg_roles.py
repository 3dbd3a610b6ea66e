"""Least privilege in PostgreSQL, tried on real connections: each of shardlog's roles is made to
attempt what it must not do (every attempt must fail with SQLSTATE 42501 insufficient_privilege
or 25006 read_only_sql_transaction) and what it must do (which must work); nobody is trusted;
passwords are SCRAM verifiers generated at bring-up; and the router's shard connections use the
roles, never the superuser."""

from __future__ import annotations

import asyncio
import itertools
import os
import stat
import uuid
from collections.abc import AsyncIterator
from datetime import date, timedelta

import asyncpg
import httpx
import orjson
import pytest

from bench.shard_view import shard_sql
from router import bootstrap, clock
from router.db import ddl, pools, roles
from router.db.names import DayTable, day_table
from router.settings import Settings
from services.cluster import LocalCluster
from services.credentials import CATALOG_ROLE, ROUTER_ROLES
from services.postgres import PostgresInstance
from tests.support import READ_ONLY, refused

_owner_ids = itertools.count(900_000_000 + os.getpid() % 1000 * 1000)


@pytest.fixture(scope="module")
def shard_dsn(cluster: LocalCluster) -> str:
    return cluster.shards[0].spec.dsn()


async def _as(role: str | None, dsn: str, settings: Settings) -> asyncpg.Connection:
    """A connection like the router's pools open them (role None: the DSN's superuser)."""
    return await pools.connect(dsn, settings.pools, role=role)


@pytest.fixture
async def connections(
    shard_dsn: str, settings: Settings
) -> AsyncIterator[dict[str, asyncpg.Connection]]:
    opened = {name: await _as(role, shard_dsn, settings) for name, role in _ROLES.items()}
    try:
        yield opened
    finally:
        for connection in opened.values():
            await connection.close()


_ROLES = {
    "superuser": None,
    "writer": roles.WRITER,
    "reader": roles.READER,
    "retention": roles.RETENTION,
}


@pytest.fixture
async def table(connections: dict[str, asyncpg.Connection]) -> DayTable:
    """A day table made the way ingest makes them, by the writer, with two rows."""
    made = day_table("audit", next(_owner_ids), date(2020, 1, 2))
    writer = connections["writer"]
    assert await ddl.ensure_table(writer, made, "btree")
    await writer.execute(
        f"INSERT INTO {made.quoted} (ts, content) VALUES "
        "('2020-01-02T01:00:00Z', 'a'), ('2020-01-02T02:00:00Z', 'b')"
    )
    return made


# --- what each role may not do ---------------------------------------------------------------


async def test_the_writer_administers_nothing(
    connections: dict[str, asyncpg.Connection], table: DayTable
) -> None:
    writer = connections["writer"]
    for sql in (
        "CREATE ROLE intruder",
        f"ALTER ROLE {roles.WRITER} SUPERUSER",
        f"ALTER ROLE {roles.RETENTION} PASSWORD 'x'",
        "CREATE DATABASE intruder",
        "DROP DATABASE shardlog",
        "SELECT rolpassword FROM pg_authid",
        "COPY (SELECT 1) TO PROGRAM 'true'",
        "SELECT pg_read_file('postgresql.conf')",
        "ALTER SYSTEM SET fsync = off",
        "SET ROLE shardlog",
        f"SET ROLE {roles.READER}",
        # Membership without ADMIN: it cannot hand the day tables' owner to another role.
        f"GRANT {roles.TABLES} TO {roles.READER}",
        # The schema objects of the migrations belong to the superuser.
        "UPDATE shard_identity SET shard_name = 'other'",
        "SELECT * FROM shard_identity",
        "DROP TABLE ingest_ledger",
        "ALTER TABLE ingest_ledger ADD COLUMN x int",
        "DELETE FROM shardlog_migrations",
        # Retention's alone (router/retention/dropper.py).
        "SET deadlock_timeout = '100ms'",
    ):
        await refused(writer, sql)


async def test_the_writer_does_its_work(
    connections: dict[str, asyncpg.Connection], table: DayTable
) -> None:
    writer = connections["writer"]
    owner = await writer.fetchval(
        "SELECT relowner::regrole::text FROM pg_class WHERE oid = $1::regclass", table.quoted
    )
    assert owner == roles.TABLES
    key = f"roles-{uuid.uuid4().hex}"
    async with writer.transaction():
        await writer.execute(
            "INSERT INTO ingest_ledger (request_key, part, table_name, rows) "
            "VALUES ($1, 'p', $2, 2)",
            key,
            table.name,
        )
        assert await writer.fetchval("SELECT rows FROM ingest_ledger WHERE request_key = $1", key)
        await writer.execute("DELETE FROM ingest_ledger WHERE request_key = $1", key)
        await writer.execute(ddl.STAGE_DDL)  # flows are staged in a temporary table
        await writer.execute(f"UPDATE {table.quoted} SET content = content")
    assert await writer.fetchval(f"SELECT count(*) FROM {table.quoted}") == 2


async def test_the_reader_only_reads(
    connections: dict[str, asyncpg.Connection], table: DayTable
) -> None:
    reader = connections["reader"]
    assert await reader.fetchval("SHOW default_transaction_read_only") == "on"
    assert await reader.fetchval(f"SELECT count(*) FROM {table.quoted}") == 2
    assert await reader.fetchval(f"EXPLAIN (FORMAT JSON) SELECT * FROM {table.quoted}")
    # Read-only transactions are its default ...
    await refused(
        reader, f"INSERT INTO {table.quoted} (ts, content) VALUES (now(), 'x')", READ_ONLY
    )
    await refused(reader, f"DROP TABLE {table.quoted}", READ_ONLY)
    # ... but a default is no privilege: read-write, it still may do nothing but SELECT.
    await reader.execute("SET default_transaction_read_only = off")
    try:
        for sql in (
            f"INSERT INTO {table.quoted} (ts, content) VALUES (now(), 'x')",
            f"UPDATE {table.quoted} SET content = 'x'",
            f"DELETE FROM {table.quoted}",
            f"TRUNCATE {table.quoted}",
            f"DROP TABLE {table.quoted}",
            f"ALTER TABLE {table.quoted} ADD COLUMN x int",
            f"LOCK TABLE {table.quoted} IN SHARE MODE",
            "CREATE TABLE intruder (x int)",
            "CREATE TEMP TABLE intruder (x int)",
            "SELECT * FROM ingest_ledger",
            "SELECT * FROM shard_identity",
            "SELECT * FROM shardlog_migrations",
            f"SELECT shardlog_drop_day_table('{table.quoted}')",
            f"SET ROLE {roles.TABLES}",
            "SELECT rolpassword FROM pg_authid",
            "CREATE ROLE intruder",
        ):
            await refused(reader, sql)
    finally:
        await reader.execute("RESET default_transaction_read_only")


async def test_retention_only_reads_and_drops_day_tables(
    connections: dict[str, asyncpg.Connection], table: DayTable
) -> None:
    retention = connections["retention"]
    assert await retention.fetchval(f"SELECT count(*) FROM {table.quoted}") == 2
    for sql in (
        f"INSERT INTO {table.quoted} (ts, content) VALUES (now(), 'x')",
        f"UPDATE {table.quoted} SET content = 'x'",
        f"DELETE FROM {table.quoted}",
        f"TRUNCATE {table.quoted}",
        f"ALTER TABLE {table.quoted} RENAME TO intruder",
        # Only through the functions below:
        f"DROP TABLE {table.quoted}",
        f"LOCK TABLE {table.quoted} IN ACCESS EXCLUSIVE MODE",
        f"SET ROLE {roles.TABLES}",
        # Nothing but day tables, whatever it asks the functions:
        "SELECT shardlog_drop_day_table('ingest_ledger')",
        "SELECT shardlog_drop_day_table('shard_identity')",
        "SELECT shardlog_drop_day_table('shardlog_migrations')",
        "SELECT shardlog_lock_day_table('ingest_ledger', 'ACCESS EXCLUSIVE')",
        "SELECT shardlog_drop_day_table('pg_catalog.pg_class')",
        "DROP TABLE ingest_ledger",
        "DELETE FROM ingest_ledger",
        "DROP TABLE shard_identity",
        "DROP FUNCTION shardlog_drop_day_table(regclass)",
        "CREATE TABLE intruder (x int)",
        "CREATE TEMP TABLE intruder (x int)",
        "SELECT rolpassword FROM pg_authid",
    ):
        await refused(retention, sql)
    await refused(
        retention, f"SELECT shardlog_lock_day_table('{table.quoted}', 'ROW EXCLUSIVE')", "22023"
    )
    # What the dropper does (router/retention/dropper.py): lock, count, drop.
    async with retention.transaction():
        await retention.execute("SET LOCAL deadlock_timeout = '50ms'")
        await retention.execute(
            "SELECT shardlog_lock_day_table($1::regclass, 'ACCESS EXCLUSIVE')", table.quoted
        )
        assert await retention.fetchval(f"SELECT count(*) FROM {table.quoted}") == 2
        await retention.execute("SELECT shardlog_drop_day_table($1::regclass)", table.quoted)
    assert await retention.fetchval("SELECT to_regclass($1)", table.quoted) is None


async def test_a_table_the_writer_made_as_itself_is_no_day_table(
    connections: dict[str, asyncpg.Connection],
) -> None:
    """A day table is what shardlog_tables owns, not what is named like one."""
    name = f"audit_o{next(_owner_ids)}_20200103"
    writer = connections["writer"]
    await writer.execute(f"CREATE TABLE {name} (x int)")
    try:
        await refused(connections["retention"], f"SELECT shardlog_drop_day_table('{name}')")
    finally:
        await writer.execute(f"DROP TABLE {name}")


# --- logging in -------------------------------------------------------------------------------


async def test_nobody_is_trusted(
    connections: dict[str, asyncpg.Connection], shard_dsn: str, settings: Settings
) -> None:
    superuser = connections["superuser"]
    methods = {
        r["auth_method"] for r in await superuser.fetch("SELECT auth_method FROM pg_hba_file_rules")
    }
    assert methods == {"scram-sha-256"}
    verifiers = await superuser.fetch(
        "SELECT rolname, rolpassword FROM pg_authid WHERE rolname = ANY($1::text[])",
        ["shardlog", *roles.LOGIN_ROLES],
    )
    assert len(verifiers) == 4
    assert all(r["rolpassword"].startswith("SCRAM-SHA-256$4096:") for r in verifiers)
    no_passwords = settings.pools.model_copy(update={"passfile": None})
    for role in (None, *roles.LOGIN_ROLES):
        with pytest.raises(asyncpg.InvalidPasswordError):
            await asyncpg.connect(
                **pools.connect_options(shard_dsn, no_passwords, role=role), password="wrong"
            )


def test_passwords_are_files_only_their_owner_reads(cluster: LocalCluster) -> None:
    directory = cluster.secrets.directory
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    files = sorted(p.name for p in directory.iterdir())
    assert files == sorted(
        [
            "pgpass",
            "shardlog.password",
            f"{CATALOG_ROLE}.password",
            *(f"{r}.password" for r in ROUTER_ROLES),
        ]
    )
    assert all(stat.S_IMODE((directory / f).stat().st_mode) == 0o600 for f in files)
    assert ROUTER_ROLES == roles.LOGIN_ROLES
    assert CATALOG_ROLE == roles.CATALOG


async def test_bring_up_puts_changed_roles_back(
    connections: dict[str, asyncpg.Connection], shard_dsn: str, settings: Settings
) -> None:
    superuser = connections["superuser"]
    assert await roles.prepare(superuser, shard_dsn, settings.pools.passfile) == []
    await superuser.execute(f"ALTER ROLE {roles.READER} CREATEDB")
    await superuser.execute(f"GRANT {roles.TABLES} TO {roles.RETENTION}")
    await superuser.execute(f"ALTER ROLE {roles.READER} RESET default_transaction_read_only")
    await superuser.execute(f"ALTER ROLE {roles.WRITER} PASSWORD 'changed-by-hand'")
    changed = await roles.prepare(superuser, shard_dsn, settings.pools.passfile)
    assert sorted(changed) == sorted(
        [
            f"{roles.READER}: attributes corrected",
            f"{roles.WRITER}: password set",
            f"{roles.RETENTION}: no longer member of {roles.TABLES}",
            f"{roles.READER}: settings {{'default_transaction_read_only': 'on'}}",
        ]
    )
    assert await roles.prepare(superuser, shard_dsn, settings.pools.passfile) == []
    writer = await _as(roles.WRITER, shard_dsn, settings)
    await writer.close()


# --- the router -------------------------------------------------------------------------------


def _written_owner(api: httpx.Client) -> tuple[str, dict[str, str]]:
    """A new owner with one row written five minutes ago; its search window."""
    key = f"roles-{uuid.uuid4().hex[:8]}"
    group = sorted(s["group"] for s in api.get("/v1/admin/shards").json())[0]
    mapped = api.put(
        "/v1/admin/owners",
        json={"kind": "audit", "key": key, "group": group, "tenant": "system"},
    )
    assert mapped.status_code == 200, mapped.text
    now = clock.now().replace(microsecond=0)
    record = {"owner": key, "ts": (now - timedelta(minutes=5)).isoformat(), "content": "x"}
    ndjson = {"content-type": "application/x-ndjson"}
    written = api.post("/v1/audit", content=orjson.dumps(record), headers=ndjson)
    assert written.status_code == 200, written.text
    return key, {"from": (now - timedelta(hours=1)).isoformat(), "to": now.isoformat()}


def test_the_router_reaches_shards_only_as_the_roles(
    api: httpx.Client, cluster: LocalCluster, settings: Settings
) -> None:
    key, window = _written_owner(api)
    found = api.get("/v1/audit/search", params={"owner": key, "count": "exact", **window})
    assert found.status_code == 200, found.text
    assert [item["content"] for item in found.json()["items"]] == ["x"]
    seen: set[str] = set()
    for shard in cluster.shards:
        seen |= set(
            shard_sql(
                shard.spec.dsn(),
                "SELECT DISTINCT usename FROM pg_stat_activity "
                f"WHERE application_name = '{settings.pools.application_name}'",
            ).split()
        )
    assert {roles.WRITER, roles.READER} <= seen <= set(roles.LOGIN_ROLES), seen


def test_a_rotated_password_reaches_every_shard_and_the_coordinator(
    api: httpx.Client, cluster: LocalCluster, settings: Settings
) -> None:
    """docs/operations.md: a new password in its file, then `shardlog up` (or, with the file
    and the password file written, `shardlog migrate`)."""
    key, window = _written_owner(api)
    reader_file = cluster.secrets.directory / f"{roles.READER}.password"
    old = reader_file.read_text().strip()
    reader_file.unlink()
    cluster.secrets.ensure(ROUTER_ROLES)  # what `shardlog up` does first: a new one
    new = reader_file.read_text().strip()
    assert new != old
    report = asyncio.run(bootstrap.migrate_all(settings))
    # Once per server (roles are cluster-wide; other tests' shards share these servers) ...
    assert any(f"{roles.READER}: password set" in changes for changes in report.roles.values())
    # ... and the coordinator's mapping of every shard that has one (those holding day tables).
    assert any("coordinator login" in c for changes in report.roles.values() for c in changes)
    for shard in cluster.shards:
        dsn = shard.spec.dsn()
        assert asyncio.run(_logs_in(dsn, settings, roles.READER, new)), shard.spec.name
        assert not asyncio.run(_logs_in(dsn, settings, roles.READER, old)), shard.spec.name
    for backend in ("fanout", "fdw"):
        found = api.get("/v1/audit/search", params={"owner": key, "backend": backend, **window})
        assert found.status_code == 200, found.text
        assert [item["content"] for item in found.json()["items"]] == ["x"], backend
    # The coordinator's user mappings carry the password, the roles' statements its verifier:
    # neither statement statistics nor any server log keeps them (docs/security.md).
    verifiers = {
        shard.spec.name: asyncio.run(_verifier(shard.spec.dsn(), settings, roles.READER))
        for shard in cluster.shards
    }
    for instance in [cluster.metadata, *cluster.shards]:
        kept = _statement_records(instance)
        for secret in (old, new, verifiers.get(instance.spec.name, new)):
            assert secret.encode() not in kept, instance.spec.name


def _statement_records(instance: PostgresInstance) -> bytes:
    """What the server keeps of statement texts: pg_stat_statements' text file and its log."""
    texts = instance.data_dir / "pg_stat_tmp" / "pgss_query_texts.stat"
    return (texts.read_bytes() if texts.exists() else b"") + instance.log_file.read_bytes()


async def _verifier(dsn: str, settings: Settings, role: str) -> str:
    connection = await _as(None, dsn, settings)
    try:
        verifier: str = await connection.fetchval(
            "SELECT rolpassword FROM pg_authid WHERE rolname = $1", role
        )
    finally:
        await connection.close()
    return verifier


async def _logs_in(dsn: str, settings: Settings, role: str, password: str) -> bool:
    options = pools.connect_options(dsn, settings.pools.model_copy(update={"passfile": None}))
    try:
        connection = await asyncpg.connect(**options, user=role, password=password)
    except asyncpg.InvalidPasswordError:
        return False
    await connection.close()
    return True
