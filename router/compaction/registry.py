"""The catalog's side of a compacted owner-day: the registry's layout and the coordinator's
foreign table (docs/architecture.md, "Compacted days", step 2: the switch)."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from router.db import names
from router.db.connection import Connection
from router.db.names import DayTable


async def switch(metadata: asyncpg.Pool, tables: Sequence[DayTable], shard: str) -> None:
    """The registry says compacted (plans read the segments and the late heap rows from now
    on); the coordinator's foreign table of each owner-day reads its view. One transaction."""
    async with metadata.acquire() as connection, connection.transaction():
        for table in tables:
            await switch_in(connection, table, shard)


async def switch_in(connection: Connection, table: DayTable, shard: str) -> None:
    """``switch`` in the caller's metadata transaction."""
    await connection.execute(
        "UPDATE day_tables SET layout = 'compacted', layout_at = now() "
        "WHERE kind = $1 AND owner_id = $2 AND day = $3 AND shard = $4 "
        "AND layout <> 'compacted'",
        table.kind,
        table.owner_id,
        table.day,
        shard,
    )
    child = names.foreign_table(table, shard)
    view = names.quote_literal(f"{table.name}_all")
    await connection.execute(
        f"ALTER FOREIGN TABLE IF EXISTS {child} OPTIONS (SET table_name {view})"
    )
