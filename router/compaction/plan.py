"""Which step each owner-day of a compaction run takes next (docs/architecture.md, "Compacted
days"). Pure: the caller reads the registry, the shards' compacted_days and the clock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal

from router.db.names import DayTable

Step = Literal["open", "copy", "switch", "wait", "clear", "done"]


@dataclass(frozen=True)
class Packed:
    """A shard's compacted_days row of the owner-day."""

    segments: int
    rows: int
    heap_bytes: int
    packed_bytes: int
    cleared: bool


@dataclass(frozen=True)
class OwnerDay:
    shard: str
    table: DayTable
    # The registry's layout, and how long ago it became 'compacted' (the metadata database's
    # own time; None while it is a heap).
    compacted: bool
    switched_s_ago: float | None
    packed: Packed | None


# A flow day is compacted at least this long after it ends, whatever closed_after_s says: a
# writer looks for a compacted flow day only from half of it after the day's end
# (router/compaction/unfold.py), and routers' clocks differ by far less than the other half.
FLOW_MARGIN_S = 3600.0


def closed_after_s(kind: str, setting: float) -> float:
    """How long after its end a day of ``kind`` closes."""
    return max(setting, FLOW_MARGIN_S) if kind == "flow" else setting


def may_be_compacted(day: date, now: datetime) -> bool:
    """Whether a flow day may have been compacted by ``now`` (a writer's clock): a compactor's
    clock up to FLOW_MARGIN_S / 2 ahead would not have started on it before then."""
    return closed(day, now, FLOW_MARGIN_S / 2)


def closed(day: date, now: datetime, closed_after_s: float) -> bool:
    """A UTC day is closed ``closed_after_s`` seconds after it ends."""
    end = datetime.combine(day + timedelta(days=1), time(), UTC)
    return now >= end + timedelta(seconds=closed_after_s)


def next_step(
    owner_day: OwnerDay,
    now: datetime,
    closed_after_s: float,
    clear_after_s: float,
    clear_now: bool = False,
) -> Step:
    """open: not closed yet; copy: no segments yet; switch: copied, the registry still says
    heap (a run stopped between the two); wait: switched too recently to clear; clear: the heap
    rows the copy saw can go; done."""
    packed = owner_day.packed
    if packed is None:
        if owner_day.compacted:
            # The registry says compacted but the shard has no record: never clear on that.
            return "copy"
        return "copy" if closed(owner_day.table.day, now, closed_after_s) else "open"
    if not owner_day.compacted:
        return "switch"
    if packed.cleared:
        return "done"
    waited = owner_day.switched_s_ago or 0.0
    return "clear" if clear_now or waited >= clear_after_s else "wait"
