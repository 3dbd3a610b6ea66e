"""The shared tables made ahead of their days: on every shard not marked down, for today and
the next SHARDLOG_SHARED__DAYS_AHEAD days, the audit and flow shared tables and the owner_days
table, then the shard-day registered in the metadata's shared_tables and its shared tables
attached to the coordinator's shared parents (router/search/fdw.py), in one transaction.
Idempotent: each table is made under the advisory lock of its name (ddl.ensure_shared), so
routers running it at once make it once, and a registered shard-day is left as it is. A shard
that cannot be reached is named in the report and made by the next run."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

import asyncpg

from router import clock
from router.catalog.cache import CatalogCache
from router.catalog.snapshot import CatalogSnapshot, Shard
from router.db import ddl
from router.db.failures import DRIVER_ERRORS, describe
from router.db.names import Kind, SharedRelation, owner_days_table, shared_table
from router.db.pools import CoordinatorLogin, ShardPools
from router.errors import Unavailable
from router.periodic import PeriodicTask
from router.search import fdw

log = logging.getLogger(__name__)

KINDS: tuple[Kind, ...] = ("audit", "flow")
# owner_days first: a shard-day's shared tables never exist without their fence.
RELATIONS: tuple[SharedRelation, ...] = ("owner_days", "audit", "flow")


Registered = tuple[str, Kind, date]  # (shard, kind, day)


def ahead_days(today: date, days_ahead: int) -> list[date]:
    """Today and the ``days_ahead`` days after it."""
    return [today + timedelta(days=offset) for offset in range(days_ahead + 1)]


@dataclass
class AheadReport:
    days: list[date]
    made: list[tuple[str, str]] = field(default_factory=list)  # (shard, relation) made now
    registered: list[Registered] = field(default_factory=list)  # new entries
    attached: list[Registered] = field(default_factory=list)  # coordinator children made now
    unreachable: dict[str, str] = field(default_factory=dict)  # shard -> why

    def to_json(self) -> dict[str, Any]:
        return {
            "days": [day.isoformat() for day in self.days],
            "made": [{"shard": shard, "table": name} for shard, name in self.made],
            "registered": [
                {"shard": shard, "kind": kind, "day": day.isoformat()}
                for shard, kind, day in self.registered
            ],
            "attached": [
                {"shard": shard, "kind": kind, "day": day.isoformat()}
                for shard, kind, day in self.attached
            ],
            "unreachable": self.unreachable,
        }

    def audit_details(self) -> dict[str, Any]:
        return {
            "days": [day.isoformat() for day in self.days],
            "tables_made": len(self.made),
            "shard_days_registered": len(self.registered),
            "children_attached": len(self.attached),
            "unreachable": sorted(self.unreachable),
        }


async def _make_on(pools: ShardPools, shard: str, days: Sequence[date]) -> list[str]:
    made = []
    async with pools.writer(shard).acquire() as connection:
        for day in days:
            for relation in RELATIONS:
                if await ddl.ensure_shared(connection, relation, day):
                    made.append(
                        owner_days_table(day)
                        if relation == "owner_days"
                        else shared_table(relation, day)
                    )
    return made


async def _register(
    metadata: asyncpg.Pool, shard: Shard, login: CoordinatorLogin, days: Sequence[date]
) -> tuple[list[tuple[str, Kind, date]], list[tuple[str, Kind, date]]]:
    """The shard-days registered in shared_tables and their children attached to the
    coordinator's shared parents, in one metadata transaction (as tables.record attaches a day
    table's): the entries new and the children made now (a child found missing is made
    whether its entry is new or not)."""
    async with metadata.acquire() as connection, connection.transaction():
        rows = await connection.fetch(
            "INSERT INTO shared_tables (kind, day, shard) "
            "SELECT kind, day, $3 FROM unnest($1::text[]) AS kind, unnest($2::date[]) AS day "
            "ON CONFLICT DO NOTHING RETURNING kind, day",
            list(KINDS),
            list(days),
            shard.name,
        )
        attached = [
            (shard.name, kind, day)
            for day in days
            for kind in KINDS
            if await fdw.attach_shared(connection, kind, day, shard, login)
        ]
    return sorted((shard.name, row["kind"], row["day"]) for row in rows), attached


async def make_ahead(
    metadata: asyncpg.Pool, pools: ShardPools, snapshot: CatalogSnapshot, days: Sequence[date]
) -> AheadReport:
    """Make and register the shared tables of ``days`` on every shard not marked down, shards
    in parallel."""
    report = AheadReport(sorted(days))
    shards = sorted(name for name, shard in snapshot.shards.items() if shard.state != "down")

    async def on(shard: str) -> tuple[list[str], tuple[list[Registered], list[Registered]]]:
        made = await _make_on(pools, shard, report.days)
        known = snapshot.shards[shard]
        login = pools.coordinator_login(known.dsn)
        return made, await _register(metadata, known, login, report.days)

    results = await asyncio.gather(*(on(shard) for shard in shards), return_exceptions=True)
    for shard, result in zip(shards, results, strict=True):
        if isinstance(result, BaseException):
            if not isinstance(result, (*DRIVER_ERRORS, Unavailable)):
                raise result
            report.unreachable[shard] = describe(result)
            log.warning("shared tables ahead: %s skipped: %s", shard, describe(result))
            continue
        made, (registered, attached) = result
        report.made.extend((shard, name) for name in made)
        report.registered.extend(registered)
        report.attached.extend(attached)
    return report


Observer = Callable[[AheadReport], Awaitable[object]]


class AheadJob:
    """The router's run of make_ahead (SHARDLOG_SHARED__ENABLED): one at start, then one every
    SHARDLOG_SHARED__AHEAD_INTERVAL_S."""

    def __init__(
        self,
        metadata: asyncpg.Pool,
        pools: ShardPools,
        catalog: CatalogCache,
        days_ahead: int,
        interval_s: float,
        observer: Observer | None = None,
    ) -> None:
        self._metadata = metadata
        self._pools = pools
        self._catalog = catalog
        self._days_ahead = days_ahead
        self._observer = observer
        self._first: asyncio.Task[None] | None = None
        self._periodic = PeriodicTask("shared tables ahead", lambda: interval_s, self.run_once)

    def start(self) -> None:
        self._first = asyncio.create_task(self._run_logged(), name="shared tables ahead (start)")
        self._periodic.start()

    async def stop(self) -> None:
        if self._first is not None:
            self._first.cancel()
            await asyncio.gather(self._first, return_exceptions=True)
            self._first = None
        await self._periodic.stop()

    async def _run_logged(self) -> None:
        try:
            await self.run_once()
        except DRIVER_ERRORS as exc:
            log.warning("shared tables ahead failed: %s", describe(exc))

    async def run_once(self) -> AheadReport:
        days = ahead_days(clock.today(), self._days_ahead)
        report = await make_ahead(self._metadata, self._pools, self._catalog.snapshot, days)
        if report.made or report.registered or report.attached:
            log.info(
                "shared tables ahead: %d table(s) made, %d shard-day(s) registered, "
                "%d coordinator child(ren) attached",
                len(report.made),
                len(report.registered),
                len(report.attached),
            )
            if self._observer is not None:
                await self._observer(report)
        return report
