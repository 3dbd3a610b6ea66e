"""The promotion of an audit owner-day from its shard's shared table to a table of its own
(docs/architecture.md, "Promotion: the move of an owner-day to its own table"), in steps whose
state is read back before each, so that a run that stopped anywhere is taken further, never
repeated or skipped:

1. **Own table**: made on the shard (even ids) and recorded in the catalog (day_tables and the
   coordinator), as a write's first part of an owner-day does. Readers read an owner-day as
   its own table and its shared rows together: a new empty table changes no answer. Then a
   wait (SHARDLOG_SHARED__PROMOTE_SETTLE_S, once per run) for the readers that planned before.
2. **Move**, one READ COMMITTED transaction on the shard, as the writer, under lock_timeout:
   the owner-day's owner_days row set promoted (waiting for the writes in flight that hold it
   FOR SHARE; new ones queue behind it, then find it promoted and write into the own table),
   then, in the next statement (a new snapshot: every write that committed before the lock),
   the owner's shared rows deleted and inserted into the own table with their ids and
   created_xid, their count and checksum compared (a mismatch rolls back). No tail-log line:
   no row is new.

Survey: per shard and day, the owners whose shared rows are more than the threshold (an
index-only count through (owner_id, ts, id)), and the owner-days with unpromoted shared rows
that have an own table too (a large part went straight to an own table while small ones went
shared) or whose owner is marked own_tables (an admin's promote, or a router that placed one
more day shared before it knew)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import asyncpg

from router.catalog import tables as day_tables
from router.catalog.snapshot import CatalogSnapshot
from router.compaction import layout, repack
from router.compaction.pace import Pace
from router.db import ddl
from router.db.connection import Connection
from router.db.failures import DRIVER_ERRORS, describe
from router.db.names import (
    DayTable,
    day_table,
    owner_days_table,
    quote_ident,
    shared_segment_table,
    shared_table,
)
from router.db.pools import ShardPools
from router.settings import IngestSettings, SharedSettings

log = logging.getLogger(__name__)


class MoveMismatch(Exception):
    """The rows inserted into the own table are not those deleted from the shared table."""


@dataclass(frozen=True)
class Promoted:
    shard: str
    table: DayTable
    rows: int  # moved by this run (0: the move had happened before)
    seconds: float


@dataclass
class PromotionReport:
    promoted: list[Promoted] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # "shard/table" -> why

    def to_json(self) -> dict[str, Any]:
        return {
            "promoted": [
                {
                    "shard": p.shard,
                    "owner_id": p.table.owner_id,
                    "day": p.table.day.isoformat(),
                    "rows": p.rows,
                    "seconds": round(p.seconds, 4),
                }
                for p in self.promoted
            ],
            "failed": self.failed,
        }

    def audit_details(self) -> dict[str, Any]:
        return {
            "promoted": len(self.promoted),
            "rows_moved": sum(p.rows for p in self.promoted),
            "owner_days": [f"{p.shard}/{p.table.name}" for p in self.promoted[:100]],
            "failed": dict(list(self.failed.items())[:100]),
        }


async def survey(
    metadata: asyncpg.Pool, pools: ShardPools, shard: str, day: date, threshold: int
) -> list[DayTable]:
    """The audit owner-days of ``shard`` and ``day`` to promote, by owner id."""
    shared = quote_ident(shared_table("audit", day))
    fence = quote_ident(owner_days_table(day))
    # Owners with an own table that day on the shard, and owners marked own_tables (an
    # admin's promote), that have shared rows there too.
    both = [
        r["owner_id"]
        for r in await metadata.fetch(
            "SELECT o.owner_id FROM owner_shards AS o WHERE o.kind = 'audit' AND o.shard = $2 "
            "AND o.since <= $1 AND (EXISTS (SELECT 1 FROM day_tables AS d "
            "  WHERE d.kind = o.kind AND d.owner_id = o.owner_id AND d.shard = o.shard "
            "  AND d.day = $1) "
            "OR EXISTS (SELECT 1 FROM owners AS w WHERE w.kind = o.kind AND w.id = o.owner_id "
            "  AND w.own_tables))",
            day,
            shard,
        )
    ]
    async with pools.writer(shard).acquire() as connection:
        if await connection.fetchval("SELECT to_regclass($1) IS NULL", shared):
            return []
        grown = await connection.fetch(
            f"SELECT owner_id FROM {shared} GROUP BY owner_id HAVING count(*) > $1", threshold
        )
        segments = shared_segment_table("audit", day)
        # A compacted shard-day (an old day a longer policy keeps) holds its rows there too.
        packed = (
            f" OR EXISTS (SELECT 1 FROM {segments} AS g WHERE g.owners @> ARRAY[f.owner_id])"
            if await connection.fetchval("SELECT to_regclass($1) IS NOT NULL", segments)
            else ""
        )
        mixed = await connection.fetch(
            f"SELECT f.owner_id FROM {fence} AS f WHERE f.kind = 'audit' AND NOT f.promoted "
            f"AND f.owner_id = ANY($1::bigint[]) "
            f"AND (EXISTS (SELECT 1 FROM {shared} AS s WHERE s.owner_id = f.owner_id){packed})",
            both,
        )
    owners = sorted({r["owner_id"] for r in grown} | {r["owner_id"] for r in mixed})
    return [day_table("audit", owner, day) for owner in owners]


_MOVE = """
    WITH moved AS (
        DELETE FROM {shared} WHERE owner_id = $1
        RETURNING id, ts, content, attrs, created_xid
    ),
    copied AS (
        INSERT INTO {own} (id, ts, content, attrs, created_xid)
        SELECT id, ts, content, attrs, created_xid FROM moved
        RETURNING id, ts, content, attrs, created_xid
    )
    SELECT (SELECT count(*) FROM moved) AS moved, (SELECT count(*) FROM copied) AS copied,
        (SELECT coalesce(sum(hash_record_extended(m, 0)::numeric), 0) FROM moved AS m)
            AS moved_sum,
        (SELECT coalesce(sum(hash_record_extended(c, 0)::numeric), 0) FROM copied AS c)
            AS copied_sum
"""


async def prepare(
    metadata: asyncpg.Pool,
    pools: ShardPools,
    snapshot: CatalogSnapshot,
    shard: str,
    table: DayTable,
    ingest: IngestSettings,
) -> None:
    """Step 1: the owner-day's own table made on the shard and recorded in the catalog."""
    known = snapshot.shards[shard]
    async with pools.writer(shard).acquire() as connection:
        await ddl.ensure_table(connection, table, ingest.audit_index)
    await day_tables.record(metadata, table, known, pools.coordinator_login(known.dsn))


async def move(pools: ShardPools, shard: str, table: DayTable, lock_timeout_ms: int) -> int:
    """Step 2: the owner-day's shared rows moved into its own table; the rows moved."""
    shared = quote_ident(shared_table("audit", table.day))
    fence = quote_ident(owner_days_table(table.day))
    async with pools.writer(shard).acquire() as connection, connection.transaction():
        await connection.execute(f"SET LOCAL lock_timeout = {int(lock_timeout_ms)}")
        await connection.execute(
            f"UPDATE {fence} SET promoted = true WHERE owner_id = $1 AND kind = 'audit'",
            table.owner_id,
        )
        answer = await connection.fetchrow(
            _MOVE.format(shared=shared, own=table.quoted), table.owner_id
        )
        assert answer is not None
        if (answer["moved"], answer["moved_sum"]) != (answer["copied"], answer["copied_sum"]):
            raise MoveMismatch(
                f"{table.name} on {shard}: {answer['moved']} rows deleted, "
                f"{answer['copied']} inserted, checksums {answer['moved_sum']} and "
                f"{answer['copied_sum']}"
            )
        unpacked = await _move_packed(connection, shard, table)
    return int(answer["moved"]) + unpacked


async def _move_packed(connection: Connection, shard: str, table: DayTable) -> int:
    """The owner-day's rows in its compacted shard-day's shared segments (an old day, moved
    before a longer policy's day is dropped) copied into its own table, with their ids and
    created_xid, and taken out of the segments, in the move's transaction; the rows moved."""
    shard_day = DayTable("audit", 0, table.day, own=False, shared=True, shared_compacted=True)
    if not await connection.fetchval(
        "SELECT to_regclass($1) IS NOT NULL", shard_day.shared_segments
    ):
        return 0
    copied = int(
        await connection.fetchval(
            f"WITH copied AS (INSERT INTO {table.quoted} (id, ts, content, attrs, created_xid) "
            f"SELECT u.id, u.ts, u.content, u.attrs, u.created_xid "
            f"FROM {layout.shared_segments(shard_day)} "
            f"WHERE {layout.shared_owned(table.owner_id)} RETURNING 1) SELECT count(*) FROM copied"
        )
    )
    taken = await repack.without_owner(connection, "audit", table.day, table.owner_id, Pace(0))
    if taken != copied:
        raise MoveMismatch(
            f"{table.name} on {shard}: {copied} rows copied from the shared segments, "
            f"{taken} taken out of them"
        )
    return copied


async def promote_all(
    metadata: asyncpg.Pool,
    pools: ShardPools,
    snapshot: CatalogSnapshot,
    days: Sequence[date],
    shared: SharedSettings,
    ingest: IngestSettings,
) -> PromotionReport:
    """Survey every active or draining shard, make and record the own tables of what it found,
    wait SHARDLOG_SHARED__PROMOTE_SETTLE_S, then move the owner-days one by one. The wait: a
    reader plans an owner-day from the catalog, then reads it on its shard within its shard
    deadline; one that planned before the own table was recorded (it reads the shared table
    alone) has read, under a snapshot taken before the move, by the time the move begins. A
    failure is reported and left to the next run."""
    report = PromotionReport()
    found: list[tuple[str, DayTable]] = []
    shards = sorted(n for n, s in snapshot.shards.items() if s.state in ("active", "draining"))
    for shard in shards:
        for day in days:
            try:
                tables = await survey(metadata, pools, shard, day, shared.own_table_rows)
            except DRIVER_ERRORS as exc:
                report.failed[f"{shard}/{shared_table('audit', day)}"] = describe(exc)
                continue
            for table in tables:
                try:
                    await prepare(metadata, pools, snapshot, shard, table, ingest)
                    found.append((shard, table))
                except DRIVER_ERRORS as exc:
                    _failed(report, shard, table, exc)
    if found:
        await asyncio.sleep(shared.promote_settle_s)
    for shard, table in found:
        started = time.monotonic()
        try:
            rows = await _move_retrying(pools, shard, table, shared.promote_lock_timeout_ms)
        except (*DRIVER_ERRORS, MoveMismatch) as exc:
            _failed(report, shard, table, exc)
            continue
        report.promoted.append(Promoted(shard, table, rows, time.monotonic() - started))
    marked = sorted({p.table.owner_id for p in report.promoted})
    if marked:
        # Step 3: their next days start in tables of their own (a router's cached mapping may
        # place one more day shared; the next run moves it).
        await metadata.execute(
            "UPDATE owners SET own_tables = true WHERE kind = 'audit' "
            "AND id = ANY($1::bigint[]) AND NOT own_tables",
            marked,
        )
    return report


# A move whose lock was not granted (writes of the owner-day kept holding its fence) is tried
# again after these pauses, then left to the next run.
LOCK_RETRY_PAUSES_S = (0.05, 0.1, 0.2)


async def _move_retrying(
    pools: ShardPools, shard: str, table: DayTable, lock_timeout_ms: int
) -> int:
    for pause in LOCK_RETRY_PAUSES_S:
        try:
            return await move(pools, shard, table, lock_timeout_ms)
        except asyncpg.LockNotAvailableError:
            await asyncio.sleep(pause)
    return await move(pools, shard, table, lock_timeout_ms)


def _failed(report: PromotionReport, shard: str, table: DayTable, exc: BaseException) -> None:
    report.failed[f"{shard}/{table.name}"] = describe(exc)
    log.warning("promotion of %s on %s failed: %s", table.name, shard, describe(exc))
