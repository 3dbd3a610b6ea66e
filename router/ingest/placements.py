"""What a router knows of the owner-days it writes into shared tables (docs/architecture.md,
"Placement: shared or own"), bounded: per shard and owner-day, written shared (its owner_days
row made, its owner's owner_shards row recorded) or promoted to its own table; a forgotten
entry costs the next write of it one idempotent statement on the shard and one in the
catalog."""

from __future__ import annotations

from datetime import date
from typing import Literal

import asyncpg

from router.catalog.mirror import write_mirror
from router.catalog.snapshot import OwnerMapping
from router.db.connection import Connection
from router.db.names import DayTable, owner_days_table, quote_ident
from router.lru import LRU

Placement = Literal["shared", "promoted"]


class SharedPlacements:
    def __init__(self, metadata: asyncpg.Pool, capacity: int) -> None:
        self._metadata = metadata
        self._placed: LRU[tuple[str, str, int, date], Placement] = LRU(capacity)
        # (kind, owner id, shard) -> the first day recorded for it in owner_shards.
        self._recorded: LRU[tuple[str, int, str], date] = LRU(capacity)

    def __len__(self) -> int:
        return len(self._placed)

    def of(self, shard: str, table: DayTable) -> Placement | None:
        return self._placed.get(_key(shard, table))

    def promoted(self, shard: str, table: DayTable) -> None:
        self._placed.put(_key(shard, table), "promoted")

    def forget(self, shard: str, table: DayTable) -> None:
        self._placed.pop(_key(shard, table))

    async def ensure(
        self, connection: Connection, shard: str, table: DayTable, owner: OwnerMapping | None
    ) -> None:
        """Before the owner-day's first shared write on the shard: its owner_days row (the
        fence the write holds), the shard's mirror of its owner (what pages of many owners hold
        its rows to) and its owner's owner_shards row (what readers find it by)."""
        if self.of(shard, table) is not None:
            return
        if owner is not None:
            await write_mirror(connection, [owner], correct=False)
        promoted = await connection.fetchval(
            f"WITH made AS (INSERT INTO {quote_ident(owner_days_table(table.day))} "
            "(kind, owner_id) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING promoted) "
            f"SELECT promoted FROM made UNION ALL SELECT promoted FROM "
            f"{quote_ident(owner_days_table(table.day))} WHERE kind = $1 AND owner_id = $2",
            table.kind,
            table.owner_id,
        )
        await self._record(shard, table)
        self._placed.put(_key(shard, table), "promoted" if promoted else "shared")

    async def _record(self, shard: str, table: DayTable) -> None:
        key = (table.kind, table.owner_id, shard)
        since = self._recorded.get(key)
        if since is not None and since <= table.day:
            return
        recorded: date = await self._metadata.fetchval(
            "INSERT INTO owner_shards (kind, owner_id, shard, since) VALUES ($1, $2, $3, $4) "
            "ON CONFLICT (kind, owner_id, shard) DO UPDATE "
            "SET since = least(owner_shards.since, EXCLUDED.since) RETURNING since",
            table.kind,
            table.owner_id,
            shard,
            table.day,
        )
        self._recorded.put(key, recorded)


def _key(shard: str, table: DayTable) -> tuple[str, str, int, date]:
    return (shard, table.kind, table.owner_id, table.day)
