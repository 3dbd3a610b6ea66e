"""Least privilege on the metadata server: the router's catalog login (shardlog_catalog, made at
bring-up, granted by schema/metadata/0009_catalog_role.sql) is made to attempt what it must not
do, on a connection of the pool the router itself opens (router/db/catalog_login.py), and what
it must do; the running router's sessions are that role's; a superuser login is refused; and a
catalog made before the role existed keeps working once migrated."""

from __future__ import annotations

import shutil
import uuid
from datetime import date
from pathlib import Path

import asyncpg
import httpx
import pytest

from router import bootstrap
from router.app import create_app
from router.catalog.cache import LISTENER_APPLICATION_NAME
from router.catalog.snapshot import Shard
from router.db import catalog_login, pools, roles
from router.db.migrate import migrate
from router.db.names import day_table, foreign_table, parent_table
from router.db.pools import CoordinatorLogin
from router.search import fdw
from router.settings import MetadataSettings, Settings
from services.cluster import LocalCluster
from tests.support import refused


async def test_the_catalog_role_administers_nothing(catalog_pool: asyncpg.Pool) -> None:
    async with catalog_pool.acquire() as connection:
        assert await connection.fetchval("SELECT current_user") == roles.CATALOG
        for sql in (
            "ALTER SYSTEM SET fsync = off",
            "CREATE ROLE intruder",
            f"ALTER ROLE {roles.CATALOG} SUPERUSER",
            "ALTER ROLE shardlog PASSWORD 'x'",
            "CREATE DATABASE intruder",
            "DROP DATABASE shardlog",
            "SET ROLE shardlog",
            "COPY (SELECT 1) TO PROGRAM 'true'",
            "COPY api_tokens TO '/tmp/shardlog-intruder'",
            "SELECT rolpassword FROM pg_authid",
            "SELECT * FROM pg_user_mapping",
            "SELECT pg_read_file('postgresql.conf')",
            "CREATE EXTENSION dblink",
            "ALTER FOREIGN DATA WRAPPER postgres_fdw NO VALIDATOR",
            # The catalog's tables belong to the bootstrap superuser: rows only, and only where
            # the router writes them.
            "DROP TABLE owners",
            "DROP TABLE api_tokens",
            "TRUNCATE api_tokens",
            "TRUNCATE owners",
            "ALTER TABLE owners ADD COLUMN x int",
            "DELETE FROM api_tokens",
            "DELETE FROM shards",
            "UPDATE catalog_version SET version = version + 1",
            "UPDATE router_secrets SET secret = secret",
            "DELETE FROM shardlog_migrations",
            "DROP TABLE fdw.children",
            "ALTER FUNCTION bump_catalog_version() SECURITY INVOKER",
            "CREATE TABLE intruder (x int)",
            "CREATE TEMP TABLE intruder (x int)",
            "CREATE FUNCTION intruder() RETURNS int LANGUAGE sql AS 'SELECT 1'",
        ):
            await refused(connection, sql)


def _login(shard: Shard, password: str) -> CoordinatorLogin:
    return CoordinatorLogin(shard.dsn, {"user": roles.READER, "password": password})


async def test_the_catalog_role_does_the_routers_work(
    catalog_pool: asyncpg.Pool, cluster: LocalCluster
) -> None:
    """Rolled back: catalog writes bump the version (the trigger runs as its owner) and the
    coordinator makes and drops its objects."""
    name = f"catrole-{uuid.uuid4().hex[:8]}"
    shard = Shard(name, "g", cluster.shards[0].spec.dsn(), "active")
    table = day_table("audit", 987_654_321, date(2020, 1, 2))
    async with catalog_pool.acquire() as connection:
        transaction = connection.transaction()
        await transaction.start()
        try:
            before = await connection.fetchval("SELECT version FROM catalog_version")
            await connection.execute("INSERT INTO tenants (name) VALUES ($1)", name)
            await connection.execute("UPDATE api_tokens SET last_used_at = now() WHERE false")
            assert await connection.fetchval("SELECT version FROM catalog_version") > before
            assert await connection.fetchval("SELECT count(*) FROM router_secrets") >= 1
            assert await connection.fetchval("SELECT pg_try_advisory_xact_lock(42)")
            await connection.execute("LISTEN shardlog_catalog")
            await fdw.attach(connection, table, shard, _login(shard, "x"))
            child = foreign_table(table, name)
            assert await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", child)
            assert await fdw.refresh_login(connection, name, _login(shard, "y"))
            await fdw.detach(connection, table, name)
            await connection.execute(f"DROP TABLE {parent_table('audit', table.owner_id)}")
        finally:
            await transaction.rollback()


def test_the_router_reaches_the_catalog_only_as_the_catalog_role(
    api: httpx.Client, cluster: LocalCluster, settings: Settings
) -> None:
    assert api.get("/v1/admin/tenants").status_code == 200
    sessions = cluster.metadata.psql(
        "shardlog",
        "SELECT DISTINCT application_name || ' ' || usename FROM pg_stat_activity "
        f"WHERE application_name IN ('{settings.metadata.application_name}', "
        f"'{LISTENER_APPLICATION_NAME}')",
    ).split("\n")
    users = {line.split()[-1] for line in sessions if line.strip()}
    assert users == {roles.CATALOG}, sessions
    assert any(line.startswith(LISTENER_APPLICATION_NAME) for line in sessions), sessions


def _as_owner(settings: Settings, allow_superuser: bool) -> Settings:
    metadata = settings.metadata.model_copy(
        update={"login": "dsn", "allow_superuser": allow_superuser}
    )
    return settings.model_copy(update={"metadata": metadata})


def test_the_router_refuses_a_superuser_catalog_login(
    settings: Settings, cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    from fastapi.testclient import TestClient

    with (
        pytest.raises(catalog_login.CatalogLoginError, match="SHARDLOG_METADATA__ALLOW_SUPERUSER"),
        TestClient(create_app(_as_owner(settings, allow_superuser=False))),
    ):
        pass
    with TestClient(create_app(_as_owner(settings, allow_superuser=True))) as client:
        assert client.get("/health/live").status_code == 200
    assert "IS A POSTGRESQL SUPERUSER" in capsys.readouterr().err


async def test_a_catalog_made_before_the_role_works_after_migrate(
    cluster: LocalCluster, settings: Settings, tmp_path: Path
) -> None:
    """An older var/: the catalog migrated to 0008 and the coordinator's objects made by the
    superuser. `shardlog up` / `migrate` hands them to the catalog role, which then runs the
    coordinator as the router does."""
    instance = cluster.metadata
    database = f"scratch_{uuid.uuid4().hex[:8]}"
    instance.psql("postgres", f"CREATE DATABASE {database}")
    older = tmp_path / "schema"
    shutil.copytree(settings.schema_dir, older)
    for later in (older / "metadata").glob("*.sql"):
        if later.name >= "0009":
            later.unlink()
    shard = Shard("old", "g", cluster.shards[0].spec.dsn(), "active")
    table = day_table("flow", 123_456_789, date(2020, 1, 3))
    scratch = settings.model_copy(
        update={"metadata": MetadataSettings(dsn=instance.spec.dsn(database))}
    )
    try:
        owner = await pools.connect_metadata(scratch.metadata_dsn(), scratch.metadata)
        try:
            await migrate(owner, older, "metadata")
            async with owner.transaction():
                await fdw.attach(owner, table, shard, _login(shard, "x"))
        finally:
            await owner.close()
        report = await bootstrap.migrate_all(scratch)
        assert report.metadata[0] == "0009_catalog_role"
        connection = await catalog_login.connect(scratch)
        try:
            async with connection.transaction():
                login = _login(shard, "y")
                assert await fdw.refresh_login(connection, shard.name, login)
                await fdw.detach(connection, table, shard.name)
                await fdw.attach(connection, table, shard, login)
                await fdw.detach(connection, table, shard.name)
                await connection.execute(f"DROP TABLE {parent_table('flow', table.owner_id)}")
        finally:
            await connection.close()
    finally:
        instance.psql("postgres", f"DROP DATABASE {database} WITH (FORCE)")


async def test_a_missing_catalog_login_says_what_to_run(
    cluster: LocalCluster, settings: Settings, tmp_path: Path
) -> None:
    """A router of this release on a var/ whose password file predates the catalog role."""
    passfile = tmp_path / "pgpass"
    lines = cluster.secrets.passfile.read_text().splitlines(keepends=True)
    passfile.write_text("".join(line for line in lines if f":{roles.CATALOG}:" not in line))
    passfile.chmod(0o600)
    older = settings.model_copy(
        update={"pools": settings.pools.model_copy(update={"passfile": passfile})}
    )
    with pytest.raises(catalog_login.CatalogLoginError, match="shardlog migrate"):
        await catalog_login.open_pool(older)
