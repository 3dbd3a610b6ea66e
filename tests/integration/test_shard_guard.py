"""A shard's database is its own: the catalog's database, another shard's database (however its
DSN is spelled), maintenance and template databases, and databases holding other applications'
objects are refused before anything is written to them."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from router import bootstrap
from router.db.migrate import migrate
from router.settings import Settings
from services.cluster import LocalCluster
from services.postgres import PostgresInstance
from services.process import free_port
from tests.support import run_cli

SHARD_OBJECTS = (
    "SELECT to_regclass('shard_identity') IS NOT NULL, to_regclass('ingest_ledger') IS NOT NULL"
)


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


# Shards these tests add go to a group of their own and are drained at once, so that no other
# test's owners or group listings meet them; none lives on the instance test_health stops.
GROUP = unique("guard")


@pytest.fixture(scope="module", autouse=True)
def guard_group(api: httpx.Client) -> None:
    response = api.post("/v1/admin/groups", json={"name": GROUP})
    assert response.status_code == 201, response.text


def new_database(instance: PostgresInstance, sql: str = "") -> str:
    """A fresh database on ``instance``, with ``sql`` run in it; returns its name."""
    name = unique("guard_")
    instance.psql("postgres", f"CREATE DATABASE {name}")
    if sql:
        instance.psql(name, sql)
    return name


def add_shard(api: httpx.Client, dsn: str, force: bool | None = None, name: str = "") -> Any:
    body: dict[str, Any] = {"name": name or unique("g"), "group": GROUP, "dsn": dsn}
    if force is not None:
        body["force"] = force
    response = api.post("/v1/admin/shards", json=body)
    if response.status_code == 201:
        assert api.post(f"/v1/admin/shards/{body['name']}/drain").status_code == 200
    return response


def refusal(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["field"] == "dsn"
    message: str = error["message"]
    return message


def holds_shard_objects(instance: PostgresInstance, database: str) -> bool:
    return instance.psql(database, SHARD_OBJECTS).strip() != "f|f"


@pytest.fixture
async def catalog(settings: Settings) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(settings.metadata_dsn())
    yield connection
    await connection.close()


@pytest.mark.parametrize("force", [False, True])
def test_the_catalogs_database_is_refused_and_left_untouched(
    api: httpx.Client, cluster: LocalCluster, force: bool
) -> None:
    spec = cluster.metadata.spec
    spellings = [
        spec.dsn(),
        f"host=localhost port={spec.port} dbname=shardlog user=shardlog application_name=x",
    ]
    for dsn in spellings:
        message = refusal(add_shard(api, dsn, force), 409)
        assert "catalog's own database" in message
    assert not holds_shard_objects(cluster.metadata, "shardlog")
    shard_rows = cluster.metadata.psql(
        "shardlog", "SELECT count(*) FROM shardlog_migrations WHERE target = 'shard'"
    )
    assert shard_rows.strip() == "0"


def test_a_database_on_the_catalogs_server_is_its_own(
    api: httpx.Client, cluster: LocalCluster
) -> None:
    database = new_database(cluster.metadata)
    response = add_shard(api, cluster.metadata.spec.dsn(database))
    assert response.status_code == 201, response.text


def test_the_maintenance_database_of_a_shards_server_is_refused(
    api: httpx.Client, cluster: LocalCluster
) -> None:
    instance = cluster.instances["shard02"]
    message = refusal(add_shard(api, instance.spec.dsn("postgres")), 409)
    assert "maintenance database" in message and "force" in message
    assert not holds_shard_objects(instance, "postgres")


@pytest.mark.parametrize("force", [False, True])
def test_a_template_database_is_refused(
    api: httpx.Client, cluster: LocalCluster, force: bool
) -> None:
    instance = cluster.instances["shard02"]
    message = refusal(add_shard(api, instance.spec.dsn("template1"), force), 422)
    assert "template" in message
    assert not holds_shard_objects(instance, "template1")


@pytest.mark.parametrize("force", [False, True])
def test_another_shards_database_is_refused_under_any_spelling(
    api: httpx.Client, cluster: LocalCluster, force: bool
) -> None:
    spec = cluster.shards[1].spec
    spellings = [
        f"postgresql://shardlog@localhost:{spec.port}/shardlog",
        f"postgresql://shardlog@{spec.host}:{spec.port}/shardlog?application_name=twin"
        "&sslmode=disable",
        f"host={spec.host} port={spec.port} dbname=shardlog user=shardlog",
        f"postgresql://shardlog@{spec.host}:{free_port()},{spec.host}:{spec.port}/shardlog",
    ]
    for dsn in spellings:
        message = refusal(add_shard(api, dsn, force), 409)
        assert f"'{spec.name}'" in message, dsn


async def test_a_shards_database_is_known_by_its_identity_not_its_stamp(
    api: httpx.Client, cluster: LocalCluster, catalog: asyncpg.Connection
) -> None:
    instance = cluster.instances["shard03"]
    database = new_database(instance)
    first = unique("a")
    assert add_shard(api, instance.spec.dsn(database), name=first).status_code == 201
    recorded = await catalog.fetchrow(
        "SELECT system_identifier, database_name FROM shards WHERE name = $1", first
    )
    assert recorded["database_name"] == database
    assert (
        str(recorded["system_identifier"])
        == instance.psql("postgres", "SELECT system_identifier FROM pg_control_system()").strip()
    )
    instance.psql(database, "DELETE FROM shard_identity")  # only the catalog knows it now
    message = refusal(
        add_shard(api, f"postgresql://shardlog@localhost:{instance.spec.port}/{database}"), 409
    )
    assert f"'{first}'" in message and "two shards cannot share a database" in message


async def test_a_stamped_database_is_taken_back_only_under_its_own_name(
    api: httpx.Client, cluster: LocalCluster, settings: Settings
) -> None:
    """A shard that left the catalog (its database still stamped with its name)."""
    instance = cluster.instances["shard03"]
    database = new_database(instance)
    left = unique("left")
    connection = await asyncpg.connect(instance.spec.dsn(database))
    try:
        await migrate(connection, settings.schema_dir, "shard")
        await connection.execute(
            "INSERT INTO shard_identity (shard_name, group_name) VALUES ($1, $2)", left, GROUP
        )
    finally:
        await connection.close()
    message = refusal(add_shard(api, instance.spec.dsn(database)), 409)
    assert f"already registered as shard '{left}'" in message
    response = add_shard(api, instance.spec.dsn(database), name=left)
    assert response.status_code == 201, response.text


def test_foreign_objects_are_refused_unless_forced(
    api: httpx.Client, cluster: LocalCluster
) -> None:
    instance = cluster.instances["shard01"]
    database = new_database(
        instance,
        "CREATE TABLE orders (id serial PRIMARY KEY); CREATE VIEW open_orders AS "
        "SELECT * FROM orders; CREATE FUNCTION total() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    )
    dsn = instance.spec.dsn(database)
    message = refusal(add_shard(api, dsn), 409)
    assert "3 objects that shardlog did not create" in message
    for described in ("table public.orders", "view public.open_orders", "function public.total()"):
        assert described in message
    assert not holds_shard_objects(instance, database)
    name = unique("forced")
    response = add_shard(api, dsn, force=True, name=name)
    assert response.status_code == 201, response.text
    assert instance.psql(database, "SELECT shard_name FROM shard_identity").strip() == name


def test_a_fresh_database_is_accepted(api: httpx.Client, cluster: LocalCluster) -> None:
    instance = cluster.instances["shard02"]
    database = new_database(instance)
    response = add_shard(api, instance.spec.dsn(database))
    assert response.status_code == 201, response.text
    assert holds_shard_objects(instance, database)


def test_registration_needs_the_bootstrap_superuser(
    api: httpx.Client, cluster: LocalCluster
) -> None:
    """Registering creates the shard roles on the server and migrates: not for the router's own
    roles (router/db/roles.py); nothing is written before that is known."""
    instance = cluster.instances["shard02"]
    database = new_database(instance)
    spec = instance.spec
    dsn = f"postgresql://shardlog_writer@{spec.host}:{spec.port}/{database}"
    message = refusal(add_shard(api, dsn), 422)
    assert "needs the bootstrap superuser, not shardlog_writer" in message
    assert not holds_shard_objects(instance, database)


@pytest.mark.parametrize("force", [False, True])
def test_a_database_holding_a_catalog_is_refused(
    api: httpx.Client, cluster: LocalCluster, settings: Settings, force: bool
) -> None:
    instance = cluster.instances["shard01"]
    database = new_database(
        instance, "CREATE TABLE catalog_version (v int); CREATE TABLE shard_groups (n text)"
    )
    message = refusal(add_shard(api, instance.spec.dsn(database), force), 409)
    assert "holds a shardlog catalog" in message
    assert not holds_shard_objects(instance, database)


async def test_a_legacy_shard_that_does_not_answer_blocks_unless_forced(
    api: httpx.Client, cluster: LocalCluster, catalog: asyncpg.Connection
) -> None:
    legacy = unique("legacy")
    await catalog.execute(
        "INSERT INTO shards (name, group_name, dsn, state) VALUES ($1, $2, $3, 'down')",
        legacy,
        GROUP,
        f"postgresql://shardlog@127.0.0.1:{free_port()}/shardlog",
    )
    instance = cluster.instances["shard03"]
    try:
        message = refusal(add_shard(api, instance.spec.dsn(new_database(instance))), 409)
        assert f"{legacy}:" in message and "force" in message
        response = add_shard(api, instance.spec.dsn(new_database(instance)), force=True)
        assert response.status_code == 201, response.text
    finally:
        await catalog.execute("DELETE FROM shards WHERE name = $1", legacy)


async def test_legacy_shards_get_their_database_recorded(
    api: httpx.Client, cluster: LocalCluster, catalog: asyncpg.Connection, settings: Settings
) -> None:
    instance = cluster.instances["shard03"]
    legacy = unique("old")
    database = new_database(instance)
    assert add_shard(api, instance.spec.dsn(database), name=legacy).status_code == 201
    forget = (
        "UPDATE shards SET system_identifier = NULL, database_oid = NULL, database_name = NULL "
        "WHERE name = $1"
    )
    recorded = "SELECT database_name FROM shards WHERE name = $1"
    await catalog.execute(forget, legacy)
    assert add_shard(api, instance.spec.dsn(new_database(instance))).status_code == 201
    assert await catalog.fetchval(recorded, legacy) == database  # probed by the registration
    await catalog.execute(forget, legacy)
    report = await bootstrap.migrate_all(settings)
    assert legacy in report.shards and not report.clashes
    assert await catalog.fetchval(recorded, legacy) == database  # and by `shardlog migrate`


def test_cli_force(settings: Settings, cluster: LocalCluster) -> None:
    instance = cluster.instances["shard02"]
    dsn = instance.spec.dsn(new_database(instance, "CREATE TABLE invoices (id int)"))
    name = unique("cli")
    result = run_cli(settings, "shards", "add", name, "--group", GROUP, "--dsn", dsn)
    assert result.returncode == 2
    assert "(dsn)" in result.stderr and "public.invoices" in result.stderr
    assert "--force" in result.stderr
    result = run_cli(settings, "shards", "add", name, "--group", GROUP, "--dsn", dsn, "--force")
    assert result.returncode == 0, result.stderr
    assert run_cli(settings, "shards", "drain", name).returncode == 0
