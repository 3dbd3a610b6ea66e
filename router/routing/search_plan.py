"""Which (shard, day tables) a search touches, as a value. Pure: the caller supplies where the
owner's day tables are (the registry) and the shards' states (the catalog)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from datetime import date

from router.db.names import DayTable

# Most day tables one statement reads. A statement keeps every table it reads and an index of
# each locked until it ends, in a lock table that the whole server shares (64 x max_connections
# slots by default): a search over thousands of switches must not fill it.
TABLES_PER_STATEMENT = 200


@dataclass(frozen=True)
class ShardTarget:
    shard: str
    tables: tuple[DayTable, ...]

    def batches(self, size: int | None = None) -> tuple[ShardTarget, ...]:
        """The target cut into targets of at most ``size`` (TABLES_PER_STATEMENT) tables
        each, one per statement."""
        size = size or TABLES_PER_STATEMENT
        return tuple(
            ShardTarget(self.shard, self.tables[start : start + size])
            for start in range(0, len(self.tables), size)
        )


@dataclass(frozen=True)
class SearchPlan:
    targets: tuple[ShardTarget, ...]
    # Shards holding tables in range that the catalog marks down or no longer knows.
    unavailable: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.targets

    def compacted(self) -> frozenset[tuple[str, str]]:
        """The (shard, table name) pairs of the plan's compacted owner-days."""
        return frozenset(
            (t.shard, table.name) for t in self.targets for table in t.tables if table.compacted
        )

    def shared_compacted(self) -> frozenset[tuple[str, str]]:
        """The (shard, table name) pairs of the plan's tables whose shared rows are in a
        compacted shard-day."""
        return frozenset(
            (t.shard, table.name)
            for t in self.targets
            for table in t.tables
            if table.shared and table.shared_compacted
        )

    def shared_rows(self) -> SearchPlan:
        """The plan of the owner-days' rows in shared tables alone."""
        return self._reduced(
            lambda table: replace(table, own=False, compacted=False) if table.shared else None
        )

    def own_rows(self) -> SearchPlan:
        """The plan of the owner-days' own tables alone."""
        return self._reduced(lambda table: replace(table, shared=False) if table.own else None)

    def _reduced(self, reduce: Callable[[DayTable], DayTable | None]) -> SearchPlan:
        targets = (
            ShardTarget(
                t.shard, tuple(r for r in (reduce(table) for table in t.tables) if r is not None)
            )
            for t in self.targets
        )
        return SearchPlan(tuple(t for t in targets if t.tables), self.unavailable)

    def only(self, tables: AbstractSet[tuple[str, str]]) -> SearchPlan:
        """The plan of the (shard, table name) pairs named alone (shards left without a table
        dropped); the shards unavailable stay, so that the plan's answers say so too."""
        return self._kept(lambda shard, table: (shard, table.name) in tables)

    def without(self, tables: AbstractSet[tuple[str, str]]) -> SearchPlan:
        """The plan of every table but the (shard, table name) pairs named."""
        return self._kept(lambda shard, table: (shard, table.name) not in tables)

    def _kept(self, keep: Callable[[str, DayTable], bool]) -> SearchPlan:
        targets = (
            ShardTarget(t.shard, tuple(table for table in t.tables if keep(t.shard, table)))
            for t in self.targets
        )
        return SearchPlan(tuple(t for t in targets if t.tables), self.unavailable)


def plan_search(
    located: Iterable[tuple[str, DayTable]], days: Iterable[date], states: Mapping[str, str]
) -> SearchPlan:
    wanted = set(days)
    by_shard: dict[str, list[DayTable]] = defaultdict(list)
    for shard, table in located:
        if table.day in wanted:
            by_shard[shard].append(table)
    usable = {s: t for s, t in by_shard.items() if states.get(s) in ("active", "draining")}
    return SearchPlan(
        targets=tuple(ShardTarget(s, tuple(sorted(t))) for s, t in sorted(usable.items())),
        unavailable=tuple(sorted(set(by_shard) - set(usable))),
    )
