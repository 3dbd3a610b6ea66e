import asyncio

import asyncpg
import pytest

from router.periodic import PeriodicTask


async def test_runs_every_interval_and_survives_a_database_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    runs = 0

    async def work() -> None:
        nonlocal runs
        runs += 1
        if runs == 1:
            raise asyncpg.PostgresConnectionError("shard gone")

    task = PeriodicTask("clean-up", lambda: 0.01, work)
    task.start()
    await asyncio.sleep(0.2)
    await task.stop()
    stopped_at = runs
    await asyncio.sleep(0.05)
    assert stopped_at >= 3
    assert runs == stopped_at
    assert "clean-up failed: " in caplog.text


async def test_first_run_waits_an_interval() -> None:
    runs = 0

    async def work() -> None:
        nonlocal runs
        runs += 1

    task = PeriodicTask("slow", lambda: 60.0, work)
    task.start()
    await asyncio.sleep(0.05)
    await task.stop()
    assert runs == 0
