"""Which step an owner-day takes next (router/compaction/plan.py), over every state."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from pydantic import ValidationError

from router.compaction import plan
from router.compaction.plan import OwnerDay, Packed, closed, next_step
from router.db.names import day_table
from router.settings import CompactionSettings, Settings, TailSettings

DAY = date(2026, 11, 20)
END = datetime(2026, 11, 21, tzinfo=UTC)
SIX_HOURS = 6 * 3600.0


def owner_day(compacted: bool, switched_s_ago: float | None, packed: Packed | None) -> OwnerDay:
    return OwnerDay("shard01", day_table("audit", 7, DAY), compacted, switched_s_ago, packed)


def packed(cleared: bool = False) -> Packed:
    return Packed(segments=2, rows=1500, heap_bytes=400_000, packed_bytes=40_000, cleared=cleared)


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        (END - timedelta(microseconds=1), False),
        (END, False),
        (END + timedelta(seconds=SIX_HOURS) - timedelta(microseconds=1), False),
        (END + timedelta(seconds=SIX_HOURS), True),
        (END + timedelta(days=30), True),
    ],
)
def test_a_day_closes_its_grace_after_it_ends(now: datetime, expected: bool) -> None:
    assert closed(DAY, now, SIX_HOURS) is expected


def test_an_open_day_is_left_and_a_closed_one_copied() -> None:
    heap = owner_day(False, None, None)
    assert next_step(heap, END, SIX_HOURS, 120) == "open"
    assert next_step(heap, END, SIX_HOURS, 120, clear_now=True) == "open"
    assert next_step(heap, END + timedelta(hours=6), SIX_HOURS, 120) == "copy"


def test_a_copy_is_switched_whatever_the_clock_says() -> None:
    copied = owner_day(False, None, packed())
    assert next_step(copied, END, SIX_HOURS, 120) == "switch"


@pytest.mark.parametrize(
    ("switched_s_ago", "clear_now", "expected"),
    [(0.0, False, "wait"), (119.9, False, "wait"), (120.0, False, "clear"), (0.0, True, "clear")],
)
def test_a_switched_day_is_cleared_after_the_wait(
    switched_s_ago: float, clear_now: bool, expected: str
) -> None:
    switched = owner_day(True, switched_s_ago, packed())
    assert next_step(switched, END + timedelta(days=2), SIX_HOURS, 120, clear_now) == expected


def test_a_cleared_day_is_done() -> None:
    assert next_step(owner_day(True, 5000.0, packed(cleared=True)), END, SIX_HOURS, 120) == "done"


def test_a_registry_that_says_compacted_without_a_copy_is_copied_never_cleared() -> None:
    """The shard's record is what clears: without it the heap is the only copy."""
    orphan = owner_day(True, 5000.0, None)
    assert next_step(orphan, END, SIX_HOURS, 120, clear_now=True) == "copy"


def test_a_day_may_not_close_before_the_tail_forgets_it() -> None:
    with pytest.raises(ValidationError, match="closed_after_s"):
        Settings(
            compaction=CompactionSettings(closed_after_s=60), tail=TailSettings(log_keep_s=900)
        )
    assert (
        Settings(
            compaction=CompactionSettings(closed_after_s=900), tail=TailSettings(log_keep_s=900)
        ).compaction.closed_after_s
        == 900
    )


def test_a_flow_day_closes_an_hour_after_its_end_at_the_soonest() -> None:
    """Writers look for a compacted flow day only half an hour after its end: a compaction
    never starts on one before an hour has passed, whatever CLOSED_AFTER_S says."""
    assert plan.closed_after_s("flow", 0) == plan.FLOW_MARGIN_S == 3600
    assert plan.closed_after_s("flow", SIX_HOURS) == SIX_HOURS
    assert plan.closed_after_s("audit", 0) == 0
    half = timedelta(seconds=plan.FLOW_MARGIN_S / 2)
    assert not plan.may_be_compacted(DAY, END + half - timedelta(microseconds=1))
    assert plan.may_be_compacted(DAY, END + half)
    # The writer asks before any compactor could start, even one whose clock is ahead by
    # less than the other half.
    earliest = END + timedelta(seconds=plan.closed_after_s("flow", 0))
    assert plan.may_be_compacted(DAY, earliest - half)
