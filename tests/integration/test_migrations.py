"""Migrations against real databases: idempotent, checksummed, ordered."""

from __future__ import annotations

import shutil
import uuid
from datetime import date, timedelta
from pathlib import Path

import asyncpg
import pytest

from router.db import ddl, roles
from router.db.migrate import MigrationError, load_migrations, migrate
from router.db.names import DayTable, day_table, parent_table, shared_table
from router.search import fdw
from router.settings import Settings
from services.cluster import LocalCluster
from services.postgres import InstanceSpec, PostgresInstance
from services.process import free_port, server_user


@pytest.fixture
async def scratch_db(cluster: LocalCluster, settings: Settings):
    """A fresh database on the metadata instance, dropped afterwards."""
    instance = cluster.metadata
    name = f"scratch_{id(object()) % 10**8}"
    instance.psql("postgres", f"CREATE DATABASE {name}")
    connection = await asyncpg.connect(instance.spec.dsn(name))
    # The shard migrations grant to shardlog's roles, which bring-up creates on a shard's server.
    await roles.prepare(connection, instance.spec.dsn(name), settings.pools.passfile)
    yield connection
    await connection.close()
    instance.psql("postgres", f"DROP DATABASE {name} WITH (FORCE)")


async def test_metadata_migrations_are_idempotent(scratch_db, settings: Settings) -> None:
    first = await migrate(scratch_db, settings.schema_dir, "metadata")
    assert [m.version for m in first] == list(range(1, len(first) + 1))
    assert len(first) >= 2
    assert await migrate(scratch_db, settings.schema_dir, "metadata") == []
    rows = await scratch_db.fetch("SELECT target, version, checksum FROM shardlog_migrations")
    assert [(r["target"], r["version"]) for r in rows] == [("metadata", m.version) for m in first]
    assert await scratch_db.fetchval("SELECT version FROM catalog_version") == 1


@pytest.fixture
async def schema_copy(scratch_db, settings: Settings, tmp_path: Path) -> Path:
    """A copy of schema/ whose shard migrations are applied to the scratch database."""
    schema = tmp_path / "schema"
    shutil.copytree(settings.schema_dir, schema)
    await migrate(scratch_db, schema, "shard")
    return schema


def next_shard_migration(schema: Path, name: str, sql: str) -> int:
    count = len(list((schema / "shard").glob("*.sql")))
    (schema / "shard" / f"{count + 1:04d}_{name}.sql").write_text(sql)
    return count


async def test_edited_applied_migration_is_refused(scratch_db, schema_copy: Path) -> None:
    schema = schema_copy
    migration = schema / "shard" / "0001_identity.sql"
    migration.write_text(migration.read_text() + "\n-- edited\n")
    with pytest.raises(MigrationError, match="changed after it was applied"):
        await migrate(scratch_db, schema, "shard")


async def test_new_migration_is_applied_once(scratch_db, schema_copy: Path) -> None:
    schema = schema_copy
    next_shard_migration(schema, "extra", "CREATE TABLE extra (v int);")
    applied = await migrate(scratch_db, schema, "shard")
    assert [m.name for m in applied] == ["extra"]
    assert await migrate(scratch_db, schema, "shard") == []


async def test_database_newer_than_files_is_refused(
    scratch_db, settings: Settings, tmp_path: Path
) -> None:
    await migrate(scratch_db, settings.schema_dir, "shard")
    await scratch_db.execute(
        "INSERT INTO shardlog_migrations (target, version, name, checksum) "
        "VALUES ('shard', 999, 'future', 'x')"
    )
    with pytest.raises(MigrationError, match="newer shardlog"):
        await migrate(scratch_db, settings.schema_dir, "shard")


async def test_failed_migration_leaves_nothing_half_applied(scratch_db, schema_copy: Path) -> None:
    schema = schema_copy
    count = next_shard_migration(
        schema, "broken", "CREATE TABLE half (v int); SELECT * FROM no_such_table;"
    )
    with pytest.raises(asyncpg.UndefinedTableError):
        await migrate(scratch_db, schema, "shard")
    assert await scratch_db.fetchval("SELECT to_regclass('half')") is None
    versions = await scratch_db.fetchval("SELECT max(version) FROM shardlog_migrations")
    assert versions == count


def test_cli_migrate_reports_up_to_date(settings: Settings, cluster: LocalCluster) -> None:
    from tests.support import run_cli

    result = run_cli(settings, "migrate")
    assert result.returncode == 0, result.stderr
    assert "metadata: up to date" in result.stdout
    assert result.stdout.count("up to date") >= 1 + len(cluster.shards)


async def test_router_refuses_a_catalog_that_lacks_migrations(
    scratch_db, settings: Settings, cluster: LocalCluster
) -> None:
    from fastapi.testclient import TestClient

    from router.app import create_app
    from router.settings import MetadataSettings

    await migrate(scratch_db, settings.schema_dir, "metadata")
    newest = await scratch_db.fetchval("SELECT max(version) FROM shardlog_migrations")
    await scratch_db.execute("DELETE FROM shardlog_migrations WHERE version = $1", newest)
    name = await scratch_db.fetchval("SELECT current_database()")
    behind = settings.model_copy(
        update={"metadata": MetadataSettings(dsn=cluster.metadata.spec.dsn(name))}
    )
    with (
        pytest.raises(RuntimeError, match="run `shardlog migrate` first"),
        TestClient(create_app(behind)),
    ):
        pass


def schema_before(settings: Settings, tmp_path: Path, version: int, target: str = "shard") -> Path:
    """A copy of the schema directory without the ``target``'s migrations from ``version`` on."""
    schema = tmp_path / "schema"
    shutil.copytree(settings.schema_dir, schema)
    for path in (schema / target).glob("*.sql"):
        if int(path.name[:4]) >= version:
            path.unlink()
    return schema


async def test_day_tables_of_older_routers_get_created_xid(
    scratch_db, settings: Settings, tmp_path: Path
) -> None:
    """0005: the day tables already there get the inserting transaction: NULL in their rows,
    set in every row inserted after (what consistent searches keep to)."""
    schema = schema_before(settings, tmp_path, 5)
    await migrate(scratch_db, schema, "shard")
    table = day_table("audit", 5, date(2026, 1, 1))
    await scratch_db.execute(
        f"CREATE TABLE {table.quoted} (id bigint GENERATED BY DEFAULT AS IDENTITY, "
        "ts timestamptz NOT NULL, content text NOT NULL, attrs jsonb)"
    )
    await scratch_db.execute(f"INSERT INTO {table.quoted} (ts, content) VALUES (now(), 'old')")
    applied = await migrate(scratch_db, settings.schema_dir, "shard")
    assert [m.name for m in applied][:1] == ["created_xid"]
    async with scratch_db.transaction():
        stamped = await scratch_db.fetchval(
            f"INSERT INTO {table.quoted} (ts, content) VALUES (now(), 'new') "
            "RETURNING created_xid = pg_current_xact_id()"
        )
    assert stamped is True
    rows = await scratch_db.fetch(f"SELECT content, created_xid IS NULL AS old FROM {table.quoted}")
    assert {(r["content"], r["old"]) for r in rows} == {("old", True), ("new", False)}
    ledger = await scratch_db.fetchval(
        "SELECT count(*) FROM pg_attribute WHERE attrelid = 'ingest_ledger'::regclass "
        "AND attname = 'created_xid'"
    )
    assert ledger == 0


async def test_flow_day_tables_of_older_routers_get_the_sample_index(
    scratch_db, settings: Settings, tmp_path: Path
) -> None:
    """0006: the flow day tables already there get the index that count=estimate samples
    flows through, as new ones get it from router/db/ddl.py; audit day tables get none."""
    await migrate(scratch_db, schema_before(settings, tmp_path, 6), "shard")
    flows, audit = day_table("flow", 6, date(2026, 1, 1)), day_table("audit", 6, date(2026, 1, 1))
    await scratch_db.execute(f"SET ROLE {roles.TABLES}")
    for table in (flows, audit):
        for statement in ddl.table_ddl(table, "btree"):
            await scratch_db.execute(statement)
    await scratch_db.execute(f"DROP INDEX {flows.index_name('sample')}")
    await scratch_db.execute("RESET ROLE")
    before = await index_definitions(scratch_db, flows)
    applied = await migrate(scratch_db, settings.schema_dir, "shard")
    assert [m.name for m in applied][:1] == ["flow_sample"]
    added = set(await index_definitions(scratch_db, flows)) - set(before)
    await scratch_db.execute(f"DROP TABLE {flows.quoted}")
    async with scratch_db.transaction():
        await scratch_db.execute(f"SET LOCAL ROLE {roles.TABLES}")
        for statement in ddl.table_ddl(flows, "btree"):
            await scratch_db.execute(statement)
    made = set(await index_definitions(scratch_db, flows)) - set(before)
    assert len(added) == 1 and added == made
    assert "WHERE ((id % (16)::bigint) = 0)" in added.pop()
    assert not [d for d in await index_definitions(scratch_db, audit) if "sample" in d]


async def test_flow_day_tables_of_older_routers_get_the_exporters_columns(
    scratch_db, settings: Settings, tmp_path: Path
) -> None:
    """0009: the flow day tables already there get the columns flow exporters fill, the same
    as new ones get from router/db/ddl.py; their rows keep NULL and false."""
    await migrate(scratch_db, schema_before(settings, tmp_path, 9), "shard")
    old, new = day_table("flow", 9, date(2026, 1, 1)), day_table("flow", 9, date(2026, 1, 2))
    statement = ddl.table_ddl(old, "btree")[0].replace(f"{ddl.FLOW_EXPORT_DDL},", "")
    assert "tcp_flags" not in statement
    await scratch_db.execute(statement)
    await scratch_db.execute(
        f"INSERT INTO {old.quoted} (src_ip, dst_ip, src_port, dst_port, ip_version, bytes, "
        "packets, first_seen, last_seen) VALUES ('10.0.0.1', '10.0.0.2', 1, 2, 4, 3, 4, now(), "
        "now())"
    )
    applied = await migrate(scratch_db, settings.schema_dir, "shard")
    assert [m.name for m in applied][:1] == ["flow_export_columns"]
    await scratch_db.execute(ddl.table_ddl(new, "btree")[0])
    assert await column_types(scratch_db, old) == await column_types(scratch_db, new)
    row = await scratch_db.fetchrow(f"SELECT * FROM {old.quoted}")
    assert (row["tcp_flags"], row["sampling_rate"], row["sampled"], row["sampling_mixed"]) == (
        None,
        None,
        False,
        False,
    )


async def test_coordinator_flow_parents_of_older_routers_get_the_exporters_columns(
    scratch_db, settings: Settings, tmp_path: Path
) -> None:
    """Metadata 0012: the fdw path's flow parent tables already there, and their foreign
    children, get the columns shard migration 0009 added, as router/search/fdw.py makes new
    parents; audit parents are left alone."""
    await migrate(scratch_db, schema_before(settings, tmp_path, 12, "metadata"), "metadata")
    old, new, audit = parent_table("flow", 11), parent_table("flow", 12), parent_table("audit", 11)
    flow_columns = fdw.PARENT_COLUMNS["flow"]
    before = flow_columns.replace(f", {fdw.FLOW_EXPORT_PARENT_COLUMNS}", "")
    assert "tcp_flags" not in before
    await scratch_db.execute(f"CREATE TABLE {old} ({before})")
    await scratch_db.execute(f"CREATE TABLE {audit} ({fdw.PARENT_COLUMNS['audit']})")
    await scratch_db.execute(
        "CREATE SERVER migration_test FOREIGN DATA WRAPPER postgres_fdw OPTIONS (dbname 'none')"
    )
    child = "fdw.flow_s11_20260101_test"
    await scratch_db.execute(
        f"CREATE FOREIGN TABLE {child} () INHERITS ({old}) SERVER migration_test"
    )
    applied = await migrate(scratch_db, settings.schema_dir, "metadata")
    assert [m.name for m in applied][:1] == ["flow_export_columns"]
    await scratch_db.execute(f"CREATE TABLE {new} ({flow_columns})")
    assert await column_types(scratch_db, old) == await column_types(scratch_db, new)
    assert await column_types(scratch_db, child) == await column_types(scratch_db, new)
    assert [c[0] for c in await column_types(scratch_db, audit)] == [
        "attrs",
        "content",
        "id",
        "ts",
    ]


async def column_types(
    connection: asyncpg.Connection, table: DayTable | str
) -> list[tuple[str, ...]]:
    """Of a day table, or of a coordinator's table by its schema-qualified name."""
    schema, name = ("public", table.name) if isinstance(table, DayTable) else table.split(".")
    rows = await connection.fetch(
        "SELECT column_name, data_type, is_nullable, column_default "
        "FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 "
        "ORDER BY column_name",
        schema,
        name.strip('"'),
    )
    return [tuple(str(v) for v in r.values()) for r in rows]


async def index_definitions(connection: asyncpg.Connection, table: DayTable) -> list[str]:
    return [
        r["indexdef"]
        for r in await connection.fetch(
            "SELECT indexdef FROM pg_indexes WHERE tablename = $1", table.name
        )
    ]


async def test_shards_keep_statement_statistics(cluster: LocalCluster) -> None:
    """Every shard counts a statement it ran in pg_stat_statements (an alias of our own marks
    it: constants are normalised away, names are not)."""
    marker = f"probe_{uuid.uuid4().hex[:12]}"
    for shard in cluster.shards:
        connection = await asyncpg.connect(shard.spec.dsn())
        try:
            for _ in range(3):
                await connection.fetchval(f"SELECT 1 AS {marker}")
            calls = await connection.fetchval(
                "SELECT sum(calls) FROM pg_stat_statements WHERE query LIKE $1",
                f"%{marker}%",
            )
        finally:
            await connection.close()
        assert calls == 3, (shard.spec.name, calls)


async def test_statement_statistics_migrate_before_the_library_is_loaded(
    settings: Settings, cluster: LocalCluster, tmp_path: Path
) -> None:
    """A server started before its postgresql.conf named pg_stat_statements (an upgrade): the
    shard migrations apply; the view answers only once a restart loaded the library."""
    instance = PostgresInstance(
        InstanceSpec("unloaded", free_port(), "shard"),
        tmp_path,
        server_user(settings.cluster.server_user),
        settings.cluster.bin_dir,
        {"shared_preload_libraries": "", "fsync": "off", "shared_buffers": "32MB"},
        cluster.secrets,
    )
    try:
        instance.start()
        dsn = instance.spec.dsn()
        passfile = cluster.secrets.passfile
        connection = await asyncpg.connect(dsn, passfile=passfile)
        try:
            await roles.prepare(connection, dsn, passfile)
            await migrate(connection, settings.schema_dir, "shard")
            assert await connection.fetchval(
                "SELECT count(*) FROM pg_extension WHERE extname = 'pg_stat_statements'"
            )
            with pytest.raises(asyncpg.ObjectNotInPrerequisiteStateError):
                await connection.fetch("SELECT * FROM pg_stat_statements")
        finally:
            await connection.close()
    finally:
        instance.stop()


async def test_sharing_starts_after_every_day_with_a_day_table(
    scratch_db, settings: Settings, tmp_path: Path
) -> None:
    """Metadata 0020: sharing_from is after the last day with a day table and after the day
    the migration ran (a router of the previous version may still make today's tables); in a
    catalog without day tables, any day."""
    await migrate(scratch_db, schema_before(settings, tmp_path, 20, "metadata"), "metadata")
    await scratch_db.execute("INSERT INTO shard_groups (name, placement) VALUES ('g', 'hash')")
    await scratch_db.execute(
        "INSERT INTO shards (name, group_name, dsn) VALUES ('s1', 'g', 'postgresql://x/y')"
    )
    today = await scratch_db.fetchval("SELECT current_date")  # the migration's own today
    late = today + timedelta(days=3)
    await scratch_db.execute(
        "INSERT INTO day_tables (kind, owner_id, day, shard) VALUES ('audit', 1, $1, 's1')", late
    )
    await migrate(scratch_db, settings.schema_dir, "metadata")
    assert await scratch_db.fetchval("SELECT sharing_from FROM sharing") == late + timedelta(1)
    await scratch_db.execute("DROP TABLE sharing")
    await scratch_db.execute("DELETE FROM day_tables")
    await scratch_db.execute(
        "INSERT INTO day_tables (kind, owner_id, day, shard) VALUES ('audit', 1, $1, 's1')",
        today - timedelta(days=9),
    )
    migration = next(m for m in load_migrations(settings.schema_dir, "metadata") if m.version == 20)
    await scratch_db.execute(migration.sql)
    assert await scratch_db.fetchval("SELECT sharing_from FROM sharing") == today + timedelta(1)


async def test_fresh_catalogs_share_any_day(scratch_db, settings: Settings) -> None:
    await migrate(scratch_db, settings.schema_dir, "metadata")
    assert await scratch_db.fetchval("SELECT sharing_from FROM sharing") == date(1, 1, 1)


async def test_shared_tables_made_before_get_their_owner_default(
    scratch_db, settings: Settings, tmp_path: Path
) -> None:
    """Shard 0013: a shared table made ahead by an older router takes a COPY's owner from the
    transaction's shardlog.owner_id, and refuses a row without one."""
    await migrate(scratch_db, schema_before(settings, tmp_path, 13), "shard")
    day = date(2026, 1, 1)
    older = [
        s.replace(ddl.SHARED_OWNER_COLUMN, "owner_id bigint NOT NULL")
        for s in ddl.shared_ddl("audit", day)
    ]
    for statement in older:
        await scratch_db.execute(statement)
    await migrate(scratch_db, settings.schema_dir, "shard")
    table = f'"{shared_table("audit", day)}"'
    async with scratch_db.transaction():
        await scratch_db.execute("SELECT set_config('shardlog.owner_id', '42', true)")
        await scratch_db.execute(f"INSERT INTO {table} (ts, content) VALUES (now(), 'x')")
    assert await scratch_db.fetchval(f"SELECT owner_id FROM {table}") == 42
    # Never set in the session, or set by an earlier transaction and reset to empty.
    with pytest.raises((asyncpg.UndefinedObjectError, asyncpg.InvalidTextRepresentationError)):
        await scratch_db.execute(f"INSERT INTO {table} (ts, content) VALUES (now(), 'y')")
