"""How bench/search loads its data: keys are mapped through the API (as a first write would),
rows go straight into the keys' day tables on their group's shards; flows through the ingest
path's own staging and merge statement, so that their pages hold what ingest would write.
After a load every shard is vacuumed and analysed (what autovacuum does soon after) and its day
tables registered."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import asyncpg
import httpx

from bench.harness import auth_for, register_loaded
from router.catalog import store
from router.catalog.snapshot import CatalogSnapshot
from router.db import catalog_login, ddl
from router.db.names import DayTable
from router.settings import Settings

Rows = list[tuple[Any, ...]]


async def map_keys(
    url: str, kind: Literal["audit", "flow"], keys: Sequence[str], day: datetime
) -> dict[str, tuple[int, str]]:
    """{key: (catalog id, group)} after one small write per key through the router."""
    async with httpx.AsyncClient(base_url=url, timeout=60, headers=auth_for(url)) as http:
        for key in keys:
            if kind == "audit":
                record: dict[str, Any] = {"owner": key, "content": "warm"}
            else:
                record = {"switch": key, "src_ip": "192.0.2.1", "dst_ip": "192.0.2.2"}
                record |= {"src_port": 1, "dst_port": 2, "proto": 6, "bytes": 1}
            path = "/v1/audit" if kind == "audit" else "/v1/flows"
            response = await http.post(path, json=[{**record, "ts": day.isoformat()}])
            response.raise_for_status()
        found = {}
        for key in keys:
            body = (await http.get("/v1/admin/owners", params={"kind": kind, "key": key})).json()
            found[key] = (body["id"], body["group"])
    return found


@dataclass
class Shards:
    """A connection to every shard of the catalog."""

    settings: Settings
    snapshot: CatalogSnapshot
    connections: dict[str, asyncpg.Connection]

    def of(self, group: str) -> list[str]:
        return list(self.snapshot.active_shards(group))

    async def copy(
        self,
        table: DayTable,
        shards: list[str],
        batches: Iterable[Rows],
        mirror: asyncpg.Connection | None = None,
    ) -> None:
        """Audit rows (ts, content, attrs), each batch split over ``shards``; ``mirror`` (a
        one-instance peer, its table made by the caller) gets every batch whole."""
        for shard in shards:
            await ddl.ensure_table(self.connections[shard], table, "btree")
        for batch in batches:
            copies = [
                self.connections[shard].copy_records_to_table(
                    table.name, records=batch[i :: len(shards)], columns=ddl.AUDIT_COLUMNS
                )
                for i, shard in enumerate(shards)
            ]
            if mirror is not None:
                copies.append(
                    mirror.copy_records_to_table(
                        table.name, records=batch, columns=ddl.AUDIT_COLUMNS
                    )
                )
            await asyncio.gather(*copies)

    async def merge_flows(
        self, table: DayTable, shards: list[str], batches: Iterable[Rows]
    ) -> None:
        """Flow rows in ddl.FLOW_STAGE_COLUMNS order, each batch whole to one shard in turn,
        staged and merged as ingest does (ddl.flow_merge_sql)."""
        for shard in shards:
            await ddl.ensure_table(self.connections[shard], table, "btree")
        for number, batch in enumerate(batches):
            connection = self.connections[shards[number % len(shards)]]
            async with connection.transaction():
                await connection.execute(ddl.STAGE_DDL)
                await connection.copy_records_to_table(
                    ddl.FLOW_STAGE, records=batch, columns=ddl.FLOW_STAGE_COLUMNS
                )
                await connection.execute(ddl.flow_merge_sql(table), table.name)

    async def settle(self) -> None:
        """VACUUM ANALYZE every shard and register its day tables; the connections close."""
        metadata = await catalog_login.open_pool(self.settings)
        try:
            await register_loaded(self.settings, metadata, self.snapshot, self.connections)
        finally:
            await metadata.close()


@asynccontextmanager
async def shard_connections(settings: Settings) -> AsyncIterator[Shards]:
    metadata = await catalog_login.open_pool(settings)
    try:
        snapshot = await store.load_snapshot(metadata)
    finally:
        await metadata.close()
    connections = {
        name: await asyncpg.connect(shard.dsn) for name, shard in snapshot.shards.items()
    }
    try:
        yield Shards(settings, snapshot, connections)
    finally:
        for connection in connections.values():
            await connection.close()
