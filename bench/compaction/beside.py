"""Writes beside a running compaction: one client writing today's rows through the router's
/v1/audit in fixed batches, alone for a while, and while `shardlog compact --day D
--clear-now` (the CLI, a process of its own, as an operator or the router's job runs it)
compacts another, closed, day. The writer writes while the run holds its lock: from when the
run has begun (the interpreter's start is not counted) to its end (nor is its exit)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

import httpx
import orjson

from bench.harness import auth_for, cli_env
from router import clock
from router.compaction.lock import RUN_LOCK
from router.db import catalog_login
from router.settings import Settings

WRITER_OWNER = "compaction-bench-writer"


def writer_body(lines: list[str], batch: int, start: int) -> bytes:
    """``batch`` rows of today (a microsecond apart, from now), contents taken from
    ``lines`` in turn from ``start``."""
    at = clock.now()
    return b"".join(
        orjson.dumps(
            {
                "owner": WRITER_OWNER,
                "ts": (at + timedelta(microseconds=n)).isoformat(),
                "content": lines[(start + n) % len(lines)],
            }
        )
        + b"\n"
        for n in range(batch)
    )


async def write(
    url: str, lines: list[str], batch: int, done: Callable[[], bool]
) -> tuple[int, float]:
    """Batches posted one after another until ``done()``: rows written and seconds taken."""
    rows = 0
    async with httpx.AsyncClient(base_url=url, timeout=120, headers=auth_for(url)) as http:
        started = time.perf_counter()
        while not done():
            answer = await http.post(
                "/v1/audit",
                content=writer_body(lines, batch, rows),
                headers={"content-type": "application/x-ndjson"},
            )
            if answer.status_code != 200:
                raise RuntimeError(f"/v1/audit: {answer.status_code} {answer.text[:300]}")
            rows += batch
        return rows, time.perf_counter() - started


async def alone(url: str, lines: list[str], batch: int, seconds: float) -> tuple[int, float]:
    ends = time.monotonic() + seconds
    return await write(url, lines, batch, lambda: time.monotonic() >= ends)


_HELD = (
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted "
    "AND ((classid::bigint << 32) | objid::bigint) = $1)"
)


async def _run_lock(settings: Settings, ended: asyncio.Task[Any], held: bool) -> None:
    """Until the compaction run's advisory lock is ``held`` (taken: the run has begun; not:
    it is over), or the process has ended; polled every 20 ms for at most two minutes."""
    connection = await catalog_login.connect(settings)
    try:
        ends = time.monotonic() + 120
        while not ended.done():
            if await connection.fetchval(_HELD, RUN_LOCK) is held:
                return
            if time.monotonic() > ends:
                raise RuntimeError(f"the compaction run's lock never became held={held}")
            await asyncio.sleep(0.02)
    finally:
        await connection.close()


async def beside(
    settings: Settings, url: str, lines: list[str], batch: int, day: date, max_rows_per_s: int = 0
) -> dict[str, Any]:
    """The writer while `shardlog compact --day` runs (throttled to ``max_rows_per_s`` when
    given): rows, seconds, and the run's own elapsed seconds and rows (every owner-day done,
    or the run fails)."""
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "router.cli",
        "compact",
        "--day",
        day.isoformat(),
        "--clear-now",
        "--json",
        env={**cli_env(settings), "SHARDLOG_COMPACTION__MAX_ROWS_PER_S": str(max_rows_per_s)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    output = asyncio.create_task(process.communicate())
    await _run_lock(settings, output, held=True)
    released = asyncio.create_task(_run_lock(settings, output, held=False))
    rows, seconds = await write(url, lines, batch, released.done)
    await released
    stdout, stderr = await output
    if process.returncode != 0:
        raise RuntimeError(f"shardlog compact: exit {process.returncode}: {stderr.decode()[-500:]}")
    report = json.loads(stdout)
    if {o["state"] for o in report["owner_days"]} != {"done"}:
        raise RuntimeError(f"shardlog compact left {report['owner_days']}")
    return {
        "rows": rows,
        "seconds": seconds,
        "compacted_rows": sum(o["rows"] for o in report["owner_days"]),
        "cli_seconds": time.perf_counter() - started,
    }
