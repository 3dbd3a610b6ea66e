"""Bring the metadata database and every shard to the current schema, and record a local
topology in the catalog. Used by `shardlog migrate` and `shardlog up`; safe to repeat."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from router.catalog import shards as shard_admin
from router.catalog import store
from router.catalog.snapshot import Shard
from router.db import catalog_login, pools, probe, roles
from router.db.migrate import migrate
from router.db.probe import DatabaseIdentity
from router.search import fdw
from router.settings import Settings
from services.ha_topology import HaTopology
from services.topology import Topology


@dataclass
class MigrationReport:
    metadata: list[str] = field(default_factory=list)
    shards: dict[str, list[str]] = field(default_factory=dict)
    # what was changed of the metadata server's catalog role (router/db/roles.py)
    catalog_role: list[str] = field(default_factory=list)
    # shard -> what was changed of its server's roles (router/db/roles.py)
    roles: dict[str, list[str]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    # shard -> the shard recorded with the same database (the two share one database)
    clashes: dict[str, str] = field(default_factory=dict)


async def migrate_all(settings: Settings) -> MigrationReport:
    """Metadata first, then every shard in the catalog that is not marked down.
    A shard that cannot be reached fails the run (after the others were migrated)."""
    report = MigrationReport()
    # The DSN's user, the bootstrap superuser: it owns the catalog, makes the catalog role
    # (before the migration that grants it its privileges) and migrates.
    dsn = settings.metadata_dsn()
    connection = await pools.connect_metadata(dsn, settings.metadata)
    try:
        async with connection.transaction():
            report.catalog_role = await roles.prepare_catalog(
                connection, dsn, settings.pools.passfile
            )
        applied = await migrate(connection, settings.schema_dir, "metadata")
        report.metadata = [f"{m.version:04d}_{m.name}" for m in applied]
        snapshot = await store.load_snapshot(connection)
        unrecorded = {s.name for s in await store.shard_databases(connection) if not s.database}
    finally:
        await connection.close()
    found: dict[str, DatabaseIdentity] = {}
    # Roles are cluster-wide: shards sharing a server must not create them at the same time.
    role_lock = asyncio.Lock()

    async def one(name: str, dsn: str) -> None:
        # The DSN's user: the bootstrap superuser, which sets up roles and migrates.
        shard_connection = await pools.connect(dsn, settings.pools)
        try:
            async with role_lock:
                report.roles[name] = await roles.prepare(
                    shard_connection, dsn, settings.pools.passfile
                )
            done = await migrate(shard_connection, settings.schema_dir, "shard")
            report.shards[name] = [f"{m.version:04d}_{m.name}" for m in done]
            if name in unrecorded:
                found[name] = await probe.database_identity(shard_connection)
        finally:
            await shard_connection.close()

    targets = [s for s in snapshot.shards.values() if s.state != "down"]
    report.skipped = {s.name: "marked down" for s in snapshot.shards.values() if s.state == "down"}
    results = await asyncio.gather(*(one(s.name, s.dsn) for s in targets), return_exceptions=True)
    if found:
        report.clashes = await record_databases(settings, found)
    for name in await refresh_coordinator_logins(settings, targets):
        report.roles.setdefault(name, []).append(f"coordinator login of {name} set anew")
    failures = {
        s.name: r for s, r in zip(targets, results, strict=True) if isinstance(r, BaseException)
    }
    if failures:
        detail = "; ".join(f"{name}: {exc}" for name, exc in sorted(failures.items()))
        raise RuntimeError(f"shard migrations failed: {detail}")
    return report


async def refresh_coordinator_logins(settings: Settings, shards: list[Shard]) -> list[str]:
    """The coordinator's user mappings get the reader's password of the password file (after
    a rotation, or an upgrade from mappings that logged in as the DSN's user). Returns the
    shards whose mapping changed."""
    connection = await catalog_login.connect(settings)
    changed = []
    try:
        for shard in shards:
            login = pools.coordinator_login(shard.dsn, settings.pools)
            async with connection.transaction():
                if await fdw.refresh_login(connection, shard.name, login):
                    changed.append(shard.name)
    finally:
        await connection.close()
    return changed


async def record_databases(
    settings: Settings, found: dict[str, DatabaseIdentity]
) -> dict[str, str]:
    """Record the databases of shards registered before shardlog recorded them. Returns the
    shards whose database another shard already has: shard -> that other shard."""
    connection = await catalog_login.connect(settings)
    clashes: dict[str, str] = {}
    try:
        for name, identity in sorted(found.items()):
            holder = await store.record_shard_database(connection, name, identity)
            if holder is not None:
                clashes[name] = holder
    finally:
        await connection.close()
    return clashes


async def register_topology(settings: Settings, topology: Topology | HaTopology) -> list[str]:
    """Record the topology's groups and shards in the catalog; existing entries are left as
    they are. Returns the names of shards added."""
    connection = await catalog_login.connect(settings)
    added: list[str] = []
    try:
        for group in topology.groups:
            await store.ensure_group(connection, group, "random")
        snapshot = await store.load_snapshot(connection)
        for spec in topology.shards:
            if spec.name in snapshot.shards:
                continue
            assert spec.group is not None
            await shard_admin.register_shard(
                connection,
                settings.schema_dir,
                settings.pools,
                spec.name,
                spec.group,
                spec.dsn(),
            )
            added.append(spec.name)
    finally:
        await connection.close()
    return added
