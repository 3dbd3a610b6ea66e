"""The catalog's list of the shard-days whose shared tables exist (metadata shared_tables):
registered by the ahead job for the days ahead, and by a write that made them on demand (a
late row of a past day, a shard added since the job ran), before any row goes in."""

from __future__ import annotations

from datetime import date

import asyncpg

from router.db.names import Kind


async def register_shard_day(metadata: asyncpg.Pool, kind: Kind, day: date, shard: str) -> None:
    await metadata.execute(
        "INSERT INTO shared_tables (kind, day, shard) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        kind,
        day,
        shard,
    )
