"""Consistent search's pure part: snapshots, their compact form in cursors, and which shards a
later page reads."""

from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.db.names import day_table
from router.routing.search_plan import SearchPlan, ShardTarget
from router.search.snapshot import Pin, ShardSnapshot, pinned_plan


@st.composite
def snapshots(draw: st.DrawFn) -> ShardSnapshot:
    xmin = draw(st.integers(1, 2**63))
    xmax = xmin + draw(st.integers(0, 10**6))
    running = draw(st.lists(st.integers(xmin, xmax - 1), unique=True)) if xmax > xmin else []
    return ShardSnapshot(xmin, xmax, tuple(sorted(running)))


@given(snapshots())
def test_text_and_compact_forms_round_trip(snapshot: ShardSnapshot) -> None:
    assert ShardSnapshot.parse(snapshot.text()) == snapshot
    assert ShardSnapshot.from_compact(snapshot.compact()) == snapshot


def test_postgresql_text_form() -> None:
    assert ShardSnapshot.parse("740:745:740,742") == ShardSnapshot(740, 745, (740, 742))
    assert ShardSnapshot.parse("745:745:") == ShardSnapshot(745, 745)
    assert ShardSnapshot(740, 745, (740, 742)).compact() == [740, 5, 0, 2]


@pytest.mark.parametrize(
    "values", [[], [5], [5, -1], [0, 3], [5, 2, 2], [5, 1, "x"], [5, 1.5], "5:6:"]
)
def test_malformed_compact_snapshots_are_refused(values) -> None:
    with pytest.raises((ValueError, TypeError)):
        ShardSnapshot.from_compact(values)


def test_pin_round_trips_through_json() -> None:
    pin = Pin({"s1": ShardSnapshot(10, 12, (11,)), "s2": ShardSnapshot(7, 7)}, frozenset({"s3"}))
    assert Pin.from_json(pin.as_json()) == pin
    for bad in (None, [], {"m": []}, {"s": []}):
        with pytest.raises(ValueError):
            Pin.from_json(bad)


def _target(shard: str) -> ShardTarget:
    return ShardTarget(shard, (day_table("audit", 3, date(2026, 11, 23)),))


def test_a_later_page_reads_what_the_first_answered_and_reports_what_it_missed() -> None:
    snap = ShardSnapshot(5, 9)
    pin = Pin({"answered": snap, "down-now": snap}, frozenset({"failed", "was-down"}))
    plan = SearchPlan(
        (_target("answered"), _target("failed"), _target("new")),
        unavailable=("down-now", "was-down", "new-and-down"),
    )
    pinned, not_pinned = pinned_plan(plan, pin)
    assert [t.shard for t in pinned.targets] == ["answered"]
    # Shards with tables only since the first page are left out, down or not.
    assert pinned.unavailable == ("down-now", "was-down")
    assert not_pinned == ["failed"]
