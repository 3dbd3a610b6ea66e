"""A day's compaction by the real engine, timed: the run `shardlog compact --day D
--clear-now` makes (router/compaction: `locked_run` over the day's owner-days, copy, switch
and clear each), in this process so that its elapsed time and CPU are the run's alone (not an
interpreter's start); and where the copy's time goes, statement by statement."""

from __future__ import annotations

import os
import time
from datetime import date
from typing import Any

from prometheus_client import CollectorRegistry

from bench.compaction.day import CpuWatch, Spent
from router.catalog import store
from router.cli.lifecycle import context
from router.compaction import statements
from router.compaction.job import locked_run
from router.compaction.metrics import CompactionMetrics
from router.compaction.runner import Compactor, Scope
from router.db import roles
from router.db.names import day_table
from router.settings import Settings

STEPS = ("copy", "switch", "clear")


async def owner_ids(settings: Settings, keys: list[str]) -> frozenset[int]:
    async with context(settings) as ctx:
        found = [await store.get_owner(ctx.metadata, "audit", key) for key in keys]
    return frozenset(mapping.id for mapping in found if mapping is not None)


async def compact(
    settings: Settings, cluster: Any, scope: Scope, expected_rows: int
) -> tuple[Spent, dict[str, float]]:
    """Every owner-day of ``scope`` compacted (all three steps, the clear at once): elapsed
    time and the CPU of this process and PostgreSQL, and the seconds of each step summed over
    the owner-days. Anything but every row copied and every owner-day done ends the run."""
    async with context(settings) as ctx:
        registry = CollectorRegistry()
        compactor = Compactor(
            ctx.metadata, ctx.pools, settings.compaction, CompactionMetrics(registry)
        )
        watch = CpuWatch(cluster, os.getpid())
        report = await locked_run(ctx.metadata, compactor, ctx.snapshot, scope, clear_now=True)
        spent = watch.spent(expected_rows)
    if report is None:
        raise RuntimeError("another compaction run held the lock")
    copied = sum(o.rows for o in report.owner_days)
    if (
        report.failed
        or {o.state for o in report.owner_days} != {"done"}
        or (copied != expected_rows)
    ):
        raise RuntimeError(f"compaction of {scope} incomplete: {report.summary()}, {copied} rows")
    steps = {
        step: round(
            registry.get_sample_value("shardlog_compaction_step_seconds_sum", {"step": step})
            or 0.0,
            3,
        )
        for step in STEPS
    }
    return spent, steps


async def copy_profile(settings: Settings, day: date) -> dict[str, float]:
    """Seconds of each statement of the copy step (statements.py: the segments' INSERT, the
    heap's count and checksum, the unpacked segments' count and checksum), summed over every
    owner-day of ``day``, each owner-day in a transaction rolled back: the day stays a heap.
    Beside them, the floor under the INSERT: the heap read in (ts, id) order, and the codec
    alone (``shardlog_pack_audit``, ``shardlog_grams``) over arrays made beforehand (untimed)
    of the same segments: work any copy of these rows into these segments must do."""
    spent = {name: 0.0 for name in (*PROFILED, *FLOOR)}
    c = settings.compaction
    async with context(settings) as ctx:
        located = await ctx.metadata.fetch(
            "SELECT owner_id, shard FROM day_tables WHERE kind = 'audit' AND day = $1", day
        )
        for row in located:
            table = day_table("audit", row["owner_id"], day)
            async with ctx.pools.writer(row["shard"]).acquire() as connection:
                transaction = connection.transaction(isolation="repeatable_read")
                await transaction.start()
                try:
                    await connection.execute(f"SET LOCAL ROLE {roles.TABLES}")
                    for statement in statements.segment_table_ddl(table):
                        await connection.execute(statement)
                    await connection.execute("RESET ROLE")
                    for name, sql, args in (
                        (
                            "insert_segments",
                            statements.copy_sql(table),
                            (table.owner_id, c.segment_rows, c.segment_bytes, c.zstd_level),
                        ),
                        ("heap_checksum", statements.record_sql(table), (table.owner_id, day)),
                        ("verify_unpacked", statements.verify_sql(table), (table.owner_id,)),
                    ):
                        spent[name] += await _timed(connection, sql, *args)
                    await connection.execute(_ARRAYS_TABLE)
                    await connection.execute(_arrays_sql(table), c.segment_rows)
                    spent["floor_read_ordered"] += await _timed(
                        connection, _read_ordered_sql(table)
                    )
                    spent["floor_pack"] += await _timed(connection, _PACK_SQL, c.zstd_level)
                    spent["floor_grams"] += await _timed(connection, _GRAMS_SQL)
                finally:
                    await transaction.rollback()
    return {name: round(seconds, 3) for name, seconds in spent.items()}


PROFILED = ("insert_segments", "heap_checksum", "verify_unpacked")
FLOOR = ("floor_read_ordered", "floor_pack", "floor_grams")
_PACK_SQL = "SELECT sum(length(shardlog_pack_audit(i, t, c, a, x, $1))) FROM floor_arrays"
_GRAMS_SQL = "SELECT sum(length(shardlog_grams(c))) FROM floor_arrays"


def _arrays_sql(table: Any) -> str:
    """The owner-day's rows as one array per column per segment of $1 rows, in (ts, id)
    order: the codec's input, made apart from the codec."""
    ordered = "ORDER BY ts, id"
    columns = ("id", "ts", "content", "attrs", "created_xid")
    arrays = ", ".join(f"array_agg({column} {ordered})" for column in columns)
    return (
        f"INSERT INTO floor_arrays SELECT {arrays} FROM (SELECT *, "
        f"(row_number() OVER ({ordered}) - 1) / $1 AS part FROM {table.quoted}) AS numbered "
        "GROUP BY part"
    )


_ARRAYS_TABLE = (
    "CREATE TEMP TABLE floor_arrays (i bigint[], t timestamptz[], c text[], a jsonb[], "
    "x xid8[]) ON COMMIT DROP"
)


def _read_ordered_sql(table: Any) -> str:
    return (
        "SELECT count(*), sum(octet_length(content)) FROM "
        f"(SELECT content FROM {table.quoted} ORDER BY ts, id) AS ordered"
    )


async def _timed(connection: Any, sql: str, *args: Any) -> float:
    started = time.perf_counter()
    await connection.execute(sql, *args)
    return time.perf_counter() - started
