"""DELETE /v1/flows: remove given 5-tuples of one switch over a range of days from every shard
of its group (all of them, so that flows placed before a shard was added are found too)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import asyncpg

from router.auth.scopes import Grant, check_key
from router.catalog.cache import CatalogCache
from router.catalog.owners import OwnerDirectory
from router.compaction import unfold
from router.db.failures import describe, is_transient
from router.db.inet import encode_address
from router.db.names import DayTable, day_table
from router.db.pools import ShardPools
from router.errors import Invalid, Unavailable
from router.models.ingest import FlowDeleteIn

MAX_DAYS = 400

_DELETE = """
    DELETE FROM {table} AS f
    USING unnest($1::inet[], $2::inet[], $3::integer[], $4::integer[], $5::smallint[])
        AS d (src_ip, dst_ip, src_port, dst_port, proto)
    WHERE f.src_ip = d.src_ip AND f.dst_ip = d.dst_ip AND f.src_port = d.src_port
      AND f.dst_port = d.dst_port AND f.proto IS NOT DISTINCT FROM d.proto
"""


class FlowDeletion:
    def __init__(
        self,
        catalog: CatalogCache,
        owners: OwnerDirectory,
        pools: ShardPools,
        retry_after_s: int,
    ) -> None:
        self._catalog = catalog
        self._owners = owners
        self._pools = pools
        self._retry_after_s = retry_after_s

    async def delete(self, request: FlowDeleteIn, grant: Grant) -> int:
        if request.to_day < request.from_day:
            raise Invalid("to is before from", "to")
        days = (request.to_day - request.from_day).days + 1
        if days > MAX_DAYS:
            raise Invalid(f"the day range spans {days} days; the limit is {MAX_DAYS}", "to")
        columns: list[list[object]] = [[], [], [], [], []]
        for index, flow in enumerate(request.flows):
            for name in ("src_ip", "dst_ip"):
                try:
                    encode_address(getattr(flow, name).strip())
                except ValueError as exc:
                    raise Invalid(str(exc), f"flows[{index}].{name}") from None
            columns[0].append(encode_address(flow.src_ip.strip()))
            columns[1].append(encode_address(flow.dst_ip.strip()))
            columns[2].append(flow.src_port)
            columns[3].append(flow.dst_port)
            columns[4].append(flow.proto)
        check_key(grant, "flow", request.switch, None, "switch")
        mapping = await self._owners.lookup("flow", request.switch)
        if mapping is not None:
            check_key(grant, "flow", request.switch, mapping.tenant, "switch")
        if mapping is None:
            return 0  # a switch never written to has nothing to delete
        tables = [
            day_table("flow", mapping.id, request.from_day + timedelta(days=n)) for n in range(days)
        ]
        shards = self._catalog.snapshot.serving_shards(mapping.group)
        results = await asyncio.gather(
            *(self._delete_on(shard, tables, columns) for shard in shards),
            return_exceptions=True,
        )
        failed = {
            shard: r
            for shard, r in zip(shards, results, strict=True)
            if isinstance(r, BaseException)
        }
        for outcome in failed.values():
            if not is_transient(outcome):
                raise outcome
        if failed:
            detail = "; ".join(f"{s}: {describe(e)}" for s, e in sorted(failed.items()))
            raise Unavailable(
                f"flows on shard(s) {', '.join(sorted(failed))} were not deleted ({detail}); "
                "retrying is safe",
                retry_after_s=self._retry_after_s,
            )
        return sum(r for r in results if isinstance(r, int))

    async def _delete_on(
        self, shard: str, tables: list[DayTable], columns: list[list[object]]
    ) -> int:
        removed = 0
        async with self._pools.writer(shard).acquire() as connection, connection.transaction():
            present = {
                row["relname"]
                for row in await connection.fetch(
                    "SELECT relname FROM pg_class WHERE relname = ANY($1::text[]) "
                    "AND relnamespace = 'public'::regnamespace AND relkind = 'r'",
                    [t.name for t in tables],
                )
            }
            # A compacted day's rows of these flows come back to the heap first.
            await unfold.before_delete(
                connection, [t for t in tables if t.name in present], columns
            )
            for table in tables:
                if table.name not in present:
                    continue
                try:
                    status = await connection.execute(_DELETE.format(table=table.quoted), *columns)
                except asyncpg.UndefinedTableError:
                    continue  # dropped by retention meanwhile: nothing left to delete
                removed += int(status.split()[-1])
        return removed
