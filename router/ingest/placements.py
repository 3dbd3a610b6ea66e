"""What a router knows of the owner-days it writes into shared tables (docs/architecture.md,
"Placement: shared or own"), bounded: per shard and owner-day, written shared (its owner_days
row made, its owner's owner_shards row recorded) or promoted to its own table, and how many
rows this router has sent it shared; a forgotten entry costs the next write of it one
idempotent statement on the shard and one in the catalog, and starts its count again."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Literal

import asyncpg

from router.catalog.mirror import write_mirror
from router.catalog.snapshot import OwnerMapping
from router.db.connection import Connection
from router.db.names import DayTable, owner_days_table, quote_ident
from router.lru import LRU

Placement = Literal["shared", "promoted"]


@dataclass(slots=True)
class _Seen:
    placed: Placement | None = None
    shared_rows: int = 0
    outgrown: bool = False


class SharedPlacements:
    def __init__(self, metadata: asyncpg.Pool, capacity: int) -> None:
        self._metadata = metadata
        self._placed: LRU[tuple[str, str, int, date], _Seen] = LRU(capacity)
        # (kind, owner id, shard) -> the first day recorded for it in owner_shards.
        self._recorded: LRU[tuple[str, int, str], date] = LRU(capacity)

    def __len__(self) -> int:
        return len(self._placed)

    def of(self, shard: str, table: DayTable) -> Placement | None:
        seen = self._placed.get(_key(shard, table))
        return None if seen is None else seen.placed

    def shared_rows(self, shard: str, table: DayTable) -> int:
        """The rows this router has sent the owner-day's shared table on the shard (as far as
        it remembers)."""
        seen = self._placed.get(_key(shard, table))
        return 0 if seen is None else seen.shared_rows

    def outgrown(self, shard: str, table: DayTable) -> bool:
        """A part of the owner-day went to its own table because of its size: so do the
        next ones."""
        seen = self._placed.get(_key(shard, table))
        return seen is not None and seen.outgrown

    def sending(self, shard: str, table: DayTable, rows: int) -> None:
        """``rows`` more of the owner-day are on their way to its shared table."""
        self._seen(shard, table).shared_rows += rows

    def outgrew(self, shard: str, table: DayTable) -> None:
        self._seen(shard, table).outgrown = True

    def promoted(self, shard: str, table: DayTable) -> None:
        self._seen(shard, table).placed = "promoted"

    def _seen(self, shard: str, table: DayTable) -> _Seen:
        key = _key(shard, table)
        seen = self._placed.get(key)
        if seen is None:
            seen = _Seen()
            self._placed.put(key, seen)
        return seen

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
        self._seen(shard, table).placed = "promoted" if promoted else "shared"

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
