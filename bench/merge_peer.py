"""The database's own bound on writing flows: the write path's SQL run straight from one Python
process, with no router and no collector in front. Each batch is what a shard's part of a flow
write is: in one transaction, the staging table created, the batch's rows (one per 5-tuple, in
the staged column order) binary-COPYed into it, and ``ddl.flow_merge_sql`` folding them into
the day table (``INSERT ... ON CONFLICT`` on the 5-tuple, the tail log's line). Shards in
parallel, one connection each; rows dealt to shards by the router's 5-tuple placement.

Whatever a collector or a REST request adds (decoding, HTTP, staging in Python, the ledger)
can only lower the rate this peer reaches: it bounds every writer of flows into PostgreSQL on
the same machine."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import asyncpg

from bench.harness import cpu_seconds
from router import clock
from router.db import ddl
from router.db.inet import encode_packed, install_codec
from router.db.names import DayTable, day_table
from router.routing import placement

# Far above the owner ids a bench cluster hands out: the peer's day tables are its own.
PEER_OWNER_ID = 910_000_000
Staged = tuple[Any, ...]


def staged_flow(
    src: bytes,
    dst: bytes,
    src_port: int,
    dst_port: int,
    octets: int,
    packets: int,
    first: datetime,
    last: datetime,
    proto: int = 6,
) -> Staged:
    """One flow in the staging table's column order (ddl.FLOW_WRITE_COLUMNS)."""
    version = 4 if len(src) == 4 else 6
    return (
        encode_packed(src),
        encode_packed(dst),
        src_port,
        dst_port,
        version,
        proto,
        octets,
        packets,
        1,
        first,
        last,
        None,
        None,
        False,
    )


def dealt(rows: Sequence[Staged], shards: int) -> list[list[Staged]]:
    """The rows of each shard, as the router places flows (jump hash of the 5-tuple)."""
    ring = [str(index) for index in range(shards)]
    out: list[list[Staged]] = [[] for _ in range(shards)]
    for row in rows:
        key_hash = placement.flow_key_hash(row[0], row[1], row[2], row[3], row[5])
        out[int(placement.flow_shard(key_hash, ring))].append(row)
    return out


class MergePeer:
    def __init__(self, dsns: Sequence[str]) -> None:
        self.dsns = list(dsns)
        self.connections: list[asyncpg.Connection] = []
        self.table: DayTable | None = None
        # With ``account`` on, the CPU the shards' backends spent staging (COPY into the staging
        # table) and merging, read from /proc around each statement (costs the client a little).
        self.account = False
        # The merge statement of a day table (another one to compare against it).
        self.merge_sql: Callable[[DayTable], str] = ddl.flow_merge_sql
        self.stage_cpu_s = 0.0
        self.merge_cpu_s = 0.0
        self._pids: list[int] = []

    async def open(self, day: datetime | None = None) -> None:
        self.connections = [await asyncpg.connect(dsn) for dsn in self.dsns]
        self.table = day_table("flow", PEER_OWNER_ID, day or clock.now())
        for connection in self.connections:
            await install_codec(connection)
            await ddl.ensure_table(connection, self.table, "btree")
        self._pids = [int(await c.fetchval("SELECT pg_backend_pid()")) for c in self.connections]

    async def close(self) -> None:
        for connection in self.connections:
            if self.table is not None:
                await connection.execute(f"DROP TABLE IF EXISTS {self.table.quoted}")
            await connection.close()

    async def totals(self) -> tuple[int, int]:
        """Rows in the peer's day tables and their flows (sum of flow_count), over the shards."""
        table = self.table
        assert table is not None, "open() first"
        rows = flows = 0
        for connection in self.connections:
            found = await connection.fetchrow(
                f"SELECT count(*) AS n, coalesce(sum(flow_count), 0)::bigint AS f "
                f"FROM {table.quoted}"
            )
            assert found is not None
            rows, flows = rows + int(found["n"]), flows + int(found["f"])
        return rows, flows

    async def write(self, by_shard: Sequence[Sequence[Staged]], batch_rows: int) -> float:
        """Every shard's rows written in batches of at most ``batch_rows``; seconds taken."""
        table = self.table
        assert table is not None, "open() first"
        merge = self.merge_sql(table)

        async def one_shard(
            connection: asyncpg.Connection, pid: int, rows: Sequence[Staged]
        ) -> None:
            for start in range(0, len(rows), batch_rows):
                async with connection.transaction():
                    before = cpu_seconds(pid) if self.account else 0.0
                    await connection.execute(ddl.STAGE_DDL)
                    await connection.copy_records_to_table(
                        ddl.FLOW_STAGE,
                        records=rows[start : start + batch_rows],
                        columns=ddl.FLOW_WRITE_COLUMNS,
                    )
                    staged = cpu_seconds(pid) if self.account else 0.0
                    await connection.execute(merge, table.name)
                    if self.account:
                        self.stage_cpu_s += staged - before
                        self.merge_cpu_s += cpu_seconds(pid) - staged

        began = time.perf_counter()
        await asyncio.gather(
            *(
                one_shard(c, pid, rows)
                for c, pid, rows in zip(self.connections, self._pids, by_shard, strict=True)
            )
        )
        return time.perf_counter() - began
