"""Per-owner lifecycle: erase every table of one owner everywhere (the right-to-erasure case),
and restore an archived day so it is searchable again."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import asyncpg

from router.catalog import mirror, store
from router.catalog import tables as day_tables
from router.catalog.snapshot import CatalogSnapshot, OwnerKind, OwnerMapping
from router.db import ddl
from router.db.failures import DRIVER_ERRORS, describe
from router.db.names import DayTable, day_table, parent_table
from router.db.pools import ShardPools
from router.errors import Conflict, NotFound, Unavailable, excerpt
from router.retention import archive, history, inventory, shared_purge
from router.retention.dropper import Dropper
from router.retention.runner import real_today
from router.settings import IngestSettings, RetentionSettings, SharedSettings


async def _owner(metadata: asyncpg.Pool, kind: OwnerKind, key: str) -> OwnerMapping:
    mapping = await store.get_owner(metadata, kind, key)
    if mapping is None:
        raise NotFound(
            f"no {kind} owner {excerpt(key)} is known: nothing is stored for it", "owner"
        )
    return mapping


@dataclass
class EraseReport:
    owner: str
    owner_id: int
    run_id: int
    dropped: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    # Rows of the owner deleted from each shared table (shard-day) it had rows in.
    purged: list[dict[str, Any]] = field(default_factory=list)
    archives_removed: int = 0
    # Archives of shared days written again without the owner's rows: day, shard, rows.
    archives_rewritten: list[dict[str, Any]] = field(default_factory=list)
    unreachable: dict[str, str] = field(default_factory=dict)
    remaining: list[dict[str, Any]] = field(default_factory=list)
    forgotten: bool = False

    @property
    def complete(self) -> bool:
        return not (self.failed or self.unreachable or self.remaining)

    def to_json(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "owner_id": self.owner_id,
            "run_id": self.run_id,
            "complete": self.complete,
            "dropped": self.dropped,
            "failed": self.failed,
            "shared_purged": self.purged,
            "archives_removed": self.archives_removed,
            "archives_rewritten": self.archives_rewritten,
            "unreachable": self.unreachable,
            "remaining": self.remaining,
            "forgotten": self.forgotten,
        }


async def erase_owner(
    metadata: asyncpg.Pool,
    pools: ShardPools,
    snapshot: CatalogSnapshot,
    settings: RetentionSettings,
    shared: SharedSettings,
    kind: OwnerKind,
    key: str,
    before: date | None = None,
    forget: bool = False,
) -> EraseReport:
    """Drop the owner's day tables (all, or those of days before ``before``) on every shard,
    with their archives, and delete its rows of those days from the shared tables it wrote
    into. ``forget`` also removes the owner's mapping, own policies and the shards' mirror of
    its key, once nothing of it is left."""
    if forget and before is not None:
        raise Conflict("forgetting an owner erases all of its days: drop --before", "forget")
    mapping = await _owner(metadata, kind, key)
    scope = inventory.Filter(
        kind=kind,
        owner_ids=frozenset({mapping.id}),
        last=before - timedelta(days=1) if before else None,
    )
    run_id = await history.start(metadata, "erase", real_today(), False, True)
    report = EraseReport(key, mapping.id, run_id)
    found = await inventory.take(metadata, pools, snapshot, scope)
    report.unreachable = found.unreachable
    dropper = Dropper(metadata, pools, settings)
    for info in found.tables:
        result = await dropper.drop(snapshot, info.table, info.shard)
        await history.record(metadata, run_id, info.table, info.shard, result)
        entry = {**info.to_json(), "outcome": result.outcome, "error": result.error}
        (report.failed if result.outcome == "failed" else report.dropped).append(entry)
    purge = await shared_purge.purge_owner(
        metadata, pools, snapshot, shared, kind, mapping.id, before
    )
    report.purged = purge.purged
    report.unreachable.update(purge.unreachable)
    archive_dir = Path(settings.archive_dir)
    for day in archive.archived_days(archive_dir, kind, mapping.id):
        if before is None or day < before:
            report.archives_removed += archive.remove_day(
                archive_dir, day_table(kind, mapping.id, day)
            )
    report.archives_rewritten = _erase_from_shared_archives(
        archive_dir, kind, mapping.id, before, settings.archive_compression, report.failed
    )
    # Rows written meanwhile would have made a new table: say so rather than claim success.
    report.remaining = [
        t.to_json() for t in (await inventory.take(metadata, pools, snapshot, scope)).tables
    ] + purge.remaining
    if forget and report.complete:
        report.unreachable.update(await _forget_mirror(metadata, pools, snapshot, mapping))
    if forget and report.complete:
        await _forget(metadata, kind, mapping)
        report.forgotten = True
    status = "done" if report.complete else "partial"
    await history.finish(
        metadata,
        run_id,
        status,
        f"erase of {kind} owner id {mapping.id}" + (f" before {before}" if before else ""),
        {
            "tables_total": len(found.tables),
            "tables_dropped": len(report.dropped),
            "tables_failed": len(report.failed),
            "rows_dropped": sum(d["rows"] for d in report.dropped),
            "bytes_dropped": sum(d["bytes"] for d in report.dropped),
            "shared_rows_purged": purge.rows,
        },
    )
    return report


def _erase_from_shared_archives(
    archive_dir: Path,
    kind: OwnerKind,
    owner_id: int,
    before: date | None,
    level: int,
    failed: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """The owner's lines taken out of the archives of shared days that hold any (their
    manifests count them): each file written again without them; one that cannot be (a
    damaged archive) is added to ``failed``."""
    rewritten = []
    for day in archive.shared_days_archived(archive_dir, kind):
        if before is not None and day >= before:
            continue
        for manifest in archive.shared_manifests(archive_dir, kind, day):
            if not manifest.owners.get(str(owner_id)):
                continue
            place = {"kind": kind, "day": day.isoformat(), "shard": manifest.shard}
            try:
                rows = archive.remove_owner_from_shared(archive_dir, manifest, owner_id, level)
            except archive.ArchiveError as exc:
                failed.append({**place, "table": manifest.table, "error": str(exc)})
                continue
            rewritten.append({**place, "rows": rows})
    return rewritten


async def _forget_mirror(
    metadata: asyncpg.Pool, pools: ShardPools, snapshot: CatalogSnapshot, mapping: OwnerMapping
) -> dict[str, str]:
    """The owner's key out of the mirror of each shard it had shared rows on; the shards that
    could not be reached (the owner is then not forgotten: a later erase finishes it)."""
    missed: dict[str, str] = {}
    for shard in await mirror.mirrored_shards(metadata, mapping):
        known = snapshot.shards.get(shard)
        if known is None or known.state == "down":
            missed[shard] = "the shard is marked down" if known else "unknown shard"
            continue
        try:
            await mirror.forget(pools.writer(shard), mapping.kind, mapping.id)
        except DRIVER_ERRORS as exc:
            missed[shard] = describe(exc)
    return missed


async def _forget(metadata: asyncpg.Pool, kind: OwnerKind, mapping: OwnerMapping) -> None:
    async with metadata.acquire() as connection, connection.transaction():
        await connection.execute(
            "DELETE FROM day_tables WHERE kind = $1 AND owner_id = $2", kind, mapping.id
        )
        await connection.execute(
            "DELETE FROM owner_shards WHERE kind = $1 AND owner_id = $2", kind, mapping.id
        )
        await connection.execute(
            "DELETE FROM retention_policies WHERE kind = $1 AND owner_key = $2", kind, mapping.key
        )
        await connection.execute(
            "DELETE FROM owners WHERE kind = $1 AND key = $2", kind, mapping.key
        )
        await connection.execute(f"DROP TABLE IF EXISTS {parent_table(kind, mapping.id)}")


@dataclass
class RestoreReport:
    owner: str
    day: date
    hold_until: date
    restored: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "day": self.day.isoformat(),
            "hold_until": self.hold_until.isoformat(),
            "rows": sum(r["rows"] for r in self.restored),
            "restored": self.restored,
        }


def _target_shard(snapshot: CatalogSnapshot, mapping: OwnerMapping, archived_on: str) -> str:
    shard = snapshot.shards.get(archived_on)
    if shard is not None and shard.state == "active" and shard.group == mapping.group:
        return archived_on
    candidates = snapshot.active_shards(mapping.group)
    if not candidates:
        raise Unavailable(f"shard group {mapping.group!r} has no active shard to restore to")
    return candidates[0]


async def restore_day(
    metadata: asyncpg.Pool,
    pools: ShardPools,
    snapshot: CatalogSnapshot,
    settings: RetentionSettings,
    ingest: IngestSettings,
    kind: OwnerKind,
    key: str,
    day: date,
    hold_days: int | None = None,
) -> RestoreReport:
    """Load every shard's archive of the owner's day back (onto the same shard when it is
    still active in the owner's group, else onto one that is), register the tables and hold
    them from retention for ``hold_days``."""
    mapping = await _owner(metadata, kind, key)
    table = day_table(kind, mapping.id, day)
    archive_dir = Path(settings.archive_dir)
    found: list[archive.Manifest | archive.SharedManifest] = [
        *archive.manifests(archive_dir, table),
        # The owner's rows of a shared day (issue 38) are lines of its shard-day's file.
        *(
            m
            for m in archive.shared_manifests(archive_dir, kind, day)
            if m.owners.get(str(mapping.id))
        ),
    ]
    if not found:
        raise NotFound(
            f"no archive of {kind} owner {excerpt(key)} for {day} under {archive_dir}", "day"
        )
    checked = [
        (
            m,
            archive.verify_shared(archive_dir, m)
            if isinstance(m, archive.SharedManifest)
            else archive.verify(archive_dir, m, table),
        )
        for m in found
    ]
    hold = hold_days if hold_days is not None else settings.restore_hold_days
    report = RestoreReport(key, day, real_today() + timedelta(days=hold))
    created: set[str] = set()
    index = ingest.audit_index if kind == "audit" else ingest.flow_index
    for manifest, path in checked:
        shard = _target_shard(snapshot, mapping, manifest.shard)
        rows = await _load(pools, shard, table, manifest, path, index, shard in created)
        created.add(shard)
        target = snapshot.shards[shard]
        await day_tables.record(metadata, table, target, pools.coordinator_login(target.dsn))
        await metadata.execute(
            "UPDATE day_tables SET hold_until = $5 WHERE kind = $1 AND owner_id = $2 "
            "AND day = $3 AND shard = $4",
            kind,
            mapping.id,
            day,
            shard,
            report.hold_until,
        )
        report.restored.append(
            {"shard": shard, "archived_on": manifest.shard, "rows": rows, "file": str(path)}
        )
    return report


async def _load(
    pools: ShardPools,
    shard: str,
    table: DayTable,
    manifest: archive.Manifest | archive.SharedManifest,
    path: Path,
    index: ddl.IndexKind,
    ours: bool,
) -> int:
    async with pools.writer(shard).acquire() as connection:
        await ddl.ensure_table(connection, table, index)
        async with connection.transaction():
            await connection.execute("SET LOCAL statement_timeout = 0")
            await connection.execute(f"LOCK TABLE {table.quoted} IN SHARE ROW EXCLUSIVE MODE")
            if not ours and await connection.fetchval(
                f"SELECT EXISTS (SELECT 1 FROM {table.quoted})"
            ):
                raise Conflict(
                    f"{table.name} on {shard} already holds rows; restoring the archive of "
                    f"{manifest.shard} would duplicate them (nothing of it was loaded)",
                    "day",
                )
            before: int = await connection.fetchval(f"SELECT count(*) FROM {table.quoted}")
            if isinstance(manifest, archive.SharedManifest):
                loaded = await archive.load_owner(connection, table, manifest, path, before)
            else:
                loaded = await archive.load(connection, table, manifest, path, before)
    return loaded
