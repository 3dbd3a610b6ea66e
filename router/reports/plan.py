"""Which (shard, day tables) a report reads and the statement each shard runs, as a value.
Pure: the caller supplies where the owners' day tables are and the shards' states."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from router.compaction import layout
from router.db.names import DayTable
from router.reports.spec import ReportSpec
from router.reports.sql import TAG, Source, partial_sql
from router.routing.search_plan import SearchPlan, ShardTarget, plan_search
from router.search import sql
from router.search.sql import Params


@dataclass(frozen=True)
class ReportPlan:
    spec: ReportSpec
    tables: SearchPlan
    # owner id -> the owner's or switch's key, for the tag each table's rows carry
    keys: tuple[tuple[int, str], ...]

    @property
    def unavailable(self) -> tuple[str, ...]:
        return self.tables.unavailable

    @property
    def targets(self) -> tuple[ShardTarget, ...]:
        return self.tables.targets

    def statement(self, tables: Iterable[DayTable]) -> tuple[str, list[Any]]:
        """A shard's statement over ``tables`` (its target's, or those still there). A
        shard-day's rows are tagged with their owners' keys by the shard's mirror."""
        key_of = dict(self.keys)
        window = self.spec.filters.window
        bounds = layout.timestamp(window.start), layout.timestamp(window.end)
        params = Params()
        sources: list[Source] = [
            (None, sql.shard_day_source(t, params, TAG, window=bounds))
            if t.shard_day
            else (key_of[t.owner_id], layout.source(t, bounds))
            for t in tables
        ]
        return partial_sql(self.spec, sources, params)


def plan_report(
    spec: ReportSpec,
    located: Iterable[tuple[str, DayTable]],
    owners: Mapping[int, str],
    days: Iterable[date],
    states: Mapping[str, str],
) -> ReportPlan:
    """``located``: (shard, day table) of every owner in ``owners`` (id -> key)."""
    return ReportPlan(spec, plan_search(located, days, states), tuple(sorted(owners.items())))
