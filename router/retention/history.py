"""The admin history of retention runs (metadata tables retention_runs, retention_drops)."""

from __future__ import annotations

from datetime import date
from typing import Any

import asyncpg

from router.db.names import DayTable
from router.retention.dropper import Dropped


async def start(
    metadata: asyncpg.Pool, trigger: str, as_of: date, dry_run: bool, forced: bool
) -> int:
    run_id: int = await metadata.fetchval(
        "INSERT INTO retention_runs (trigger, as_of, dry_run, forced, status) "
        "VALUES ($1, $2, $3, $4, 'running') RETURNING id",
        trigger,
        as_of,
        dry_run,
        forced,
    )
    return run_id


async def record(
    metadata: asyncpg.Pool, run_id: int, table: DayTable, shard: str, result: Dropped
) -> None:
    await metadata.execute(
        "INSERT INTO retention_drops (run_id, kind, owner_id, day, shard, table_name, outcome, "
        "rows, bytes, archive, error) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) "
        "ON CONFLICT DO NOTHING",
        run_id,
        table.kind,
        table.owner_id,
        table.day,
        shard,
        table.name,
        result.outcome,
        result.rows,
        result.bytes,
        result.archive,
        result.error,
    )


async def finish(
    metadata: asyncpg.Pool,
    run_id: int,
    status: str,
    message: str | None,
    totals: dict[str, int],
) -> None:
    await metadata.execute(
        "UPDATE retention_runs SET finished_at = now(), status = $2, message = $3, "
        "tables_total = $4, tables_dropped = $5, tables_failed = $6, rows_dropped = $7, "
        "bytes_dropped = $8 WHERE id = $1",
        run_id,
        status,
        message,
        totals["tables_total"],
        totals["tables_dropped"],
        totals["tables_failed"],
        totals["rows_dropped"],
        totals["bytes_dropped"],
    )


def _run_json(row: asyncpg.Record) -> dict[str, Any]:
    out = dict(row)
    for name in ("started_at", "finished_at", "as_of"):
        if out[name] is not None:
            out[name] = out[name].isoformat()
    return out


async def runs(metadata: asyncpg.Pool, limit: int) -> list[dict[str, Any]]:
    rows = await metadata.fetch(
        "SELECT id, started_at, finished_at, trigger, as_of, dry_run, forced, status, message, "
        "tables_total, tables_dropped, tables_failed, rows_dropped, bytes_dropped "
        "FROM retention_runs ORDER BY id DESC LIMIT $1",
        limit,
    )
    return [_run_json(r) for r in rows]


async def run(metadata: asyncpg.Pool, run_id: int) -> dict[str, Any] | None:
    rows = await metadata.fetch(
        "SELECT id, started_at, finished_at, trigger, as_of, dry_run, forced, status, message, "
        "tables_total, tables_dropped, tables_failed, rows_dropped, bytes_dropped "
        "FROM retention_runs WHERE id = $1",
        run_id,
    )
    if not rows:
        return None
    out = _run_json(rows[0])
    drops = await metadata.fetch(
        "SELECT d.kind, d.owner_id, o.key AS owner, d.day, d.shard, d.table_name, d.outcome, "
        "d.rows, d.bytes, d.archive, d.error, d.at FROM retention_drops d "
        "LEFT JOIN owners o ON o.kind = d.kind AND o.id = d.owner_id "
        "WHERE d.run_id = $1 ORDER BY d.kind, d.owner_id, d.day, d.shard",
        run_id,
    )
    out["drops"] = [
        {**dict(d), "day": d["day"].isoformat(), "at": d["at"].isoformat()} for d in drops
    ]
    return out
