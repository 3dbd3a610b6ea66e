"""Runs a report: plan the shards' statements, open them all in parallel under a per-shard
deadline (a shard that fails or is late makes the answer partial, or a 503/504), stream their
sorted partials through the k-way merge, then order and cut the complete groups."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import asyncpg

from router.auth.scopes import KEY_NAME, Grant
from router.catalog.cache import CatalogCache
from router.catalog.owners import OwnerDirectory
from router.db.failures import DRIVER_ERRORS, coordinator_error
from router.db.names import parent_table, shared_parent
from router.db.pools import ShardPools
from router.errors import BadRequest
from router.reports import hll
from router.reports.merge import Group, Layout, finish, identity, merge_complete
from router.reports.order import ExternalSort, Row, spill_directory, top
from router.reports.plan import ReportPlan, plan_report
from router.reports.spec import ReportSpec
from router.reports.sql import partial_sql
from router.search import coverage
from router.search.service import SearchService
from router.search.streams import Batches, ShardCursors, ShardFailure, refuse_partial
from router.settings import ReportSettings

Backend = Literal["fanout", "fdw"]


@dataclass
class Answer:
    """A report under way: its header (known before the first group) and its groups."""

    spec: ReportSpec
    failures: list[ShardFailure]
    rows: AsyncIterator[Row]
    spilled: list[int] = field(default_factory=lambda: [0])

    def header(self) -> dict[str, Any]:
        return {
            "group_by": [k.name for k in self.spec.group_by],
            "metrics": [m.name for m in self.spec.metrics],
            "exactness": exactness(self.spec),
            "partial": bool(self.failures),
            "failed_shards": [{"shard": f.shard, "reason": f.reason} for f in self.failures],
        }


def exactness(spec: ReportSpec) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    for metric in spec.metrics:
        if metric.kind == "distinct":
            metrics[metric.name] = {
                "exact": False,
                "method": f"HyperLogLog (hll, log2m={hll.LOG2M}), sketches unioned across shards",
                "relative_standard_error": round(hll.RELATIVE_STANDARD_ERROR, 5),
            }
        else:
            metrics[metric.name] = {"exact": True}
    order = None
    if spec.order_by is not None:
        order = {
            "exact": spec.order_by.kind != "distinct",
            "method": "every group complete before ordering (partials merged by key), then "
            + ("a heap of the top limit" if spec.limit else "a full sort"),
        }
    return {"metrics": metrics, "order": order}


class ReportService:
    def __init__(
        self,
        metadata: asyncpg.Pool,
        catalog: CatalogCache,
        owners: OwnerDirectory,
        pools: ShardPools,
        search: SearchService,
        settings: ReportSettings,
    ) -> None:
        self._metadata = metadata
        self._catalog = catalog
        self._owners = owners
        self._pools = pools
        self._search = search
        self._settings = settings

    async def plan(
        self, spec: ReportSpec, grant: Grant, *, by_shard_day: bool = False
    ) -> ReportPlan:
        """The keys covered as a search covers them (listed, by prefix, or every one the token
        reaches: router/search/coverage.py), and where their day tables in range are; with
        ``by_shard_day`` (fan-out) the small owners' shared rows of a prefix or no key by
        shard-day, tagged with their keys by the shards' mirrors (SearchService.locate)."""
        days = spec.filters.window.days()
        located, owners = await self._search.locate(
            spec.kind,
            spec.keys,
            grant,
            (days[0], days[-1]),
            (self._settings.max_matched_keys, "SHARDLOG_REPORT__MAX_MATCHED_KEYS"),
            by_shard_day=by_shard_day,
        )
        states = {s.name: s.state for s in self._catalog.snapshot.shards.values()}
        return plan_report(spec, located, owners, days, states)

    async def report(
        self, spec: ReportSpec, partial_ok: bool, backend: Backend, *, grant: Grant
    ) -> Answer:
        plan = await self.plan(spec, grant, by_shard_day=backend == "fanout")
        stack = contextlib.AsyncExitStack()
        try:
            failures: list[ShardFailure] = []
            if backend == "fdw":
                streams = [await self._coordinator(plan, stack)]
            else:
                streams, failures = await self._open_all(plan, stack)
            if failures and not partial_ok:
                refuse(failures)
        except BaseException:
            await stack.aclose()
            raise
        answer = Answer(spec, failures, _empty())
        answer.rows = self._ordered(spec, streams, stack, answer)
        return answer

    # --- the groups ------------------------------------------------------------------

    async def _ordered(
        self,
        spec: ReportSpec,
        streams: Sequence[Batches],
        stack: contextlib.AsyncExitStack,
        answer: Answer,
    ) -> AsyncIterator[Row]:
        async with stack:
            groups = self._complete(spec, streams)
            if spec.order_by is None:
                count = 0
                async for batch in groups:
                    for group in batch:
                        if spec.limit is not None and count >= spec.limit:
                            return
                        count += 1
                        yield finish(spec, group)
            elif spec.limit is not None:
                index = spec.metrics.index(spec.order_by)
                best = await top(groups, index, spec.order_by, spec.descending, spec.limit)
                for group in best:
                    yield finish(spec, group)
            else:
                sorter = ExternalSort(
                    spec.order_by,
                    spec.descending,
                    self._settings.memory_budget_bytes,
                    spill_directory(self._settings.spill_dir),
                )
                try:
                    async for batch in groups:
                        for group in batch:
                            sorter.add(finish(spec, group))
                    answer.spilled[0] = sorter.spilled_runs
                    for row in sorter.sorted():
                        yield row
                finally:
                    sorter.close()

    async def _complete(
        self, spec: ReportSpec, streams: Sequence[Batches]
    ) -> AsyncIterator[list[Group]]:
        seen = False
        async for batch in merge_complete(streams, Layout.of(spec)):
            seen = seen or bool(batch)
            yield batch
        if not seen and not spec.group_by:
            yield [((), identity(spec.metrics))]

    # --- the shards ------------------------------------------------------------------

    def _cursors(self) -> ShardCursors:
        settings = self._settings
        return ShardCursors(
            self._pools,
            self._search.existing_tables,
            settings.shard_timeout_s,
            settings.fetch_rows,
            "SHARDLOG_REPORT__SHARD_TIMEOUT_S",
        )

    async def _open_all(
        self, plan: ReportPlan, stack: contextlib.AsyncExitStack
    ) -> tuple[list[Batches], list[ShardFailure]]:
        opened, failures = await self._cursors().open_all(
            plan.tables, lambda _shard, tables: plan.statement(tables), stack
        )
        return [stream for _, stream in opened], failures

    async def _coordinator(self, plan: ReportPlan, stack: contextlib.AsyncExitStack) -> Batches:
        """The same aggregate through the owners' parent tables on the coordinator, and the
        shared parent for their rows in shared tables: one statement, all or nothing (a failing
        shard fails it: 503 or 504), over at most as many owners as a report may name (a prefix
        may cover more: those go by fan-out)."""
        owners = {t.owner_id for target in plan.targets for t in target.tables}
        most = self._settings.max_keys
        if len(owners) > most:
            name = coverage.PLURAL[KEY_NAME[plan.spec.kind]]
            raise BadRequest(
                f"backend=fdw reads at most {most} {name} (SHARDLOG_REPORT__MAX_KEYS) and "
                f"{len(owners)} hold rows in the window: use backend=fanout",
                "backend",
            )
        if plan.unavailable:
            refuse([ShardFailure(s, "marked down") for s in plan.unavailable])
        if not owners:
            return _empty()
        tables = [t for target in plan.targets for t in target.tables]
        own = {t.owner_id for t in tables if t.own}
        shared = {t.owner_id for t in tables if t.shared}
        kind = plan.spec.kind
        # An owner's rows in shared tables through the kind's shared parent, by its owner id
        # (an integer, written into the statement): postgres_fdw sends it to the shards.
        sources = [(key, parent_table(kind, ident)) for ident, key in plan.keys if ident in own]
        sources += [
            (key, f"(SELECT * FROM {shared_parent(kind)} WHERE owner_id = {int(ident)}) AS s")
            for ident, key in plan.keys
            if ident in shared
        ]
        text, params = partial_sql(plan.spec, sources)
        timeout = self._settings.shard_timeout_s
        try:
            connection = await stack.enter_async_context(self._metadata.acquire(timeout=timeout))
            await stack.enter_async_context(connection.transaction(readonly=True))
            return await self._cursors().stream(connection, text, params)
        except (TimeoutError, *DRIVER_ERRORS) as exc:
            error = coordinator_error(exc, timeout, "SHARDLOG_REPORT__SHARD_TIMEOUT_S")
            if error is None:
                raise
            raise error from exc


def refuse(failures: list[ShardFailure]) -> None:
    refuse_partial(failures, "read")


async def _empty() -> AsyncIterator[Any]:
    return
    yield
