"""Which (shard, day tables) a search touches, as a value. Pure: the caller supplies where the
owner's day tables are (the registry) and the shards' states (the catalog)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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
