"""Retention's run lock (a session advisory lock on the metadata database) ends with the run,
however it ends: the metadata pool gives connections back without asyncpg's reset query, so a
lock left behind would skip every later run."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import date

import asyncpg
import httpx
import pytest

from router.catalog.snapshot import CatalogSnapshot
from router.db import catalog_login, pools
from router.retention.runner import RUN_LOCK, RetentionRunner, RunOptions, RunReport
from router.settings import Settings

EMPTY = CatalogSnapshot(version=0)


class HeldRun(RetentionRunner):
    """A run whose work waits for ``release`` (or fails when ``failure`` is set): the lock's
    handling is what is under test, not the drops."""

    def __init__(self, metadata: asyncpg.Pool, settings: Settings) -> None:
        super().__init__(metadata, pools.ShardPools(settings.pools), settings.retention, 30)
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.failure: Exception | None = None

    async def _run_locked(
        self, snapshot: CatalogSnapshot, options: RunOptions, as_of: date, today: date
    ) -> RunReport:
        self.started.set()
        await self.release.wait()
        if self.failure is not None:
            raise self.failure
        return RunReport("done", as_of)


@pytest.fixture
async def metadata(api: httpx.Client, settings: Settings) -> AsyncIterator[asyncpg.Pool]:
    """The catalog's pool as the router has it (``api``: the session's cluster is up)."""
    pool = await catalog_login.open_pool(settings)
    yield pool
    await pool.close()


async def lock_holders(metadata: asyncpg.Pool) -> int:
    """Sessions holding the run lock (a bigint key shows as its two 32-bit halves)."""
    return int(
        await metadata.fetchval(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND classid::bigint = $1 AND objid::bigint = $2 AND objsubid = 1",
            RUN_LOCK >> 32,
            RUN_LOCK & 0xFFFFFFFF,
        )
    )


async def test_a_finished_run_leaves_no_lock(metadata: asyncpg.Pool, settings: Settings) -> None:
    run = HeldRun(metadata, settings)
    task = asyncio.create_task(run.run(EMPTY, RunOptions()))
    await asyncio.wait_for(run.started.wait(), 10)
    assert await lock_holders(metadata) == 1
    assert (await run.run(EMPTY, RunOptions())).status == "skipped"
    run.release.set()
    assert (await task).status == "done"
    assert await lock_holders(metadata) == 0
    run.release.clear()
    second = asyncio.create_task(run.run(EMPTY, RunOptions()))
    run.release.set()
    assert (await second).status == "done"


@pytest.mark.parametrize("ending", ["cancelled", "failed"])
async def test_a_run_ended_early_leaves_no_lock(
    metadata: asyncpg.Pool, settings: Settings, ending: str
) -> None:
    run = HeldRun(metadata, settings)
    task = asyncio.create_task(run.run(EMPTY, RunOptions()))
    await asyncio.wait_for(run.started.wait(), 10)
    assert await lock_holders(metadata) == 1
    if ending == "cancelled":
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    else:
        run.failure = RuntimeError("a drop went wrong")
        run.release.set()
        with pytest.raises(RuntimeError):
            await task
    assert await lock_holders(metadata) == 0
    run.failure = None
    run.release.set()
    assert (await run.run(EMPTY, RunOptions())).status == "done"
