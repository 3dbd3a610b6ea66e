"""The lock that lets one compaction run through at a time across routers and the CLI: a
session advisory lock on the metadata database."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg

# pg_advisory_lock key of compaction runs ('shardlog compact' as a number).
RUN_LOCK = 0x73686C636D7061
T = TypeVar("T")


async def with_run_lock(metadata: asyncpg.Pool, work: Callable[[], Awaitable[T]]) -> T | None:
    """``work``'s answer under the compaction runs' lock, or None when another run holds it."""
    async with metadata.acquire() as lock_connection:
        try:
            if not await lock_connection.fetchval("SELECT pg_try_advisory_lock($1)", RUN_LOCK):
                return None
            try:
                return await work()
            finally:
                await lock_connection.execute("SELECT pg_advisory_unlock($1)", RUN_LOCK)
        except BaseException:
            # Connections go back to the pool without a reset query: a lock that may still be
            # held ends with its session.
            lock_connection.terminate()
            raise
