"""BRIN against btree as a day table's time index (router/db/ddl.py makes both): one table of
each on one shard, loaded by binary COPY as the write path loads it; the write rate and the
index's size after ``rows`` rows. The tables are dropped afterwards."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from bench.harness import Progress
from bench.traffic import CONTENT
from router import clock
from router.db import ddl
from router.db.names import DayTable, day_table
from services.postgres import PostgresInstance

BATCH = 10_000
# Owner ids far above any the catalog hands out: these tables are the comparison's own.
OWNER_IDS: dict[ddl.IndexKind, int] = {"btree": 900_000_001, "brin": 900_000_002}


def batches(rows: int, day: datetime) -> Any:
    """(ts, content, attrs) rows in ts order, as a day's log arrives."""
    step = timedelta(microseconds=86_400_000_000 // max(rows, 1))
    for first in range(0, rows, BATCH):
        yield [
            (day + step * n, CONTENT.format(n=n, a=n % 256, b=n // 256 % 256), None)
            for n in range(first, min(first + BATCH, rows))
        ]


async def load(connection: asyncpg.Connection, table: DayTable, rows: int) -> float:
    progress = Progress(f"{table.name} ({rows:,} rows)", rows)
    seconds = 0.0
    for batch in batches(rows, datetime.combine(table.day, datetime.min.time(), UTC)):
        started = time.perf_counter()
        await connection.copy_records_to_table(table.name, records=batch, columns=ddl.AUDIT_COLUMNS)
        seconds += time.perf_counter() - started
        progress.advance(len(batch))
    return seconds


async def compare(shard: PostgresInstance, rows: int) -> dict[str, Any]:
    connection = await asyncpg.connect(shard.spec.dsn())
    results: dict[str, Any] = {}
    try:
        for index, owner_id in OWNER_IDS.items():
            table = day_table("audit", owner_id, clock.now())
            await connection.execute(f"DROP TABLE IF EXISTS {table.quoted}")
            await ddl.ensure_table(connection, table, index)
            try:
                seconds = await load(connection, table, rows)
                index_bytes = await connection.fetchval(
                    "SELECT pg_indexes_size($1::regclass)", table.quoted
                )
            finally:
                await connection.execute(f"DROP TABLE {table.quoted}")
            results[index] = {
                "rows": rows,
                "copy_s": round(seconds, 2),
                "rows_per_s": round(rows / seconds),
                "index_bytes": index_bytes,
                "index_mb": round(index_bytes / 2**20, 2),
            }
    finally:
        await connection.close()
    return results
