"""The retention plan as a value: which tables expire, what is never dropped, when a run
refuses."""

from __future__ import annotations

from datetime import date, timedelta

from router.catalog.snapshot import CatalogSnapshot, RetentionPolicy
from router.db.names import day_table
from router.retention.inventory import TableInfo
from router.retention.plan import make_plan

TODAY = date(2026, 11, 23)
SNAPSHOT = CatalogSnapshot(
    version=1,
    retention=(
        RetentionPolicy(1, "audit", "g1", None, 7),
        RetentionPolicy(2, "audit", "g1", "keep-long", 30, archive=True),
    ),
)


def info(owner: str | None, days_ago: int, group: str | None = "g1", hold: date | None = None):
    return TableInfo(
        day_table("audit", 1 + len(owner or ""), TODAY - timedelta(days=days_ago)),
        "s1",
        10,
        False,
        8192,
        owner,
        group,
        True,
        hold,
    )


def expired_days(tables, as_of=TODAY, default_keep=90, share=1.0):
    plan = make_plan(tables, SNAPSHOT, as_of, TODAY, default_keep, share)
    return sorted((TODAY - e.info.table.day).days for e in plan.expired)


def test_group_policy_keeps_that_many_days_before_today() -> None:
    tables = [info("a", n) for n in (0, 6, 7, 8, 30)]
    assert expired_days(tables) == [8, 30]


def test_owner_policy_wins_over_the_group_and_carries_archive() -> None:
    tables = [info("keep-long", n) for n in (8, 31)]
    plan = make_plan(tables, SNAPSHOT, TODAY, TODAY, 90, 1.0)
    assert [(TODAY - e.info.table.day).days for e in plan.expired] == [31]
    assert plan.expired[0].archive and plan.expired[0].policy_id == 2


def test_without_a_policy_the_default_applies_and_unknown_owners_too() -> None:
    assert expired_days(
        [info("x", 20, group="g2"), info(None, 40, group=None)], default_keep=30
    ) == [40]


def test_todays_and_future_tables_stay_whatever_the_run_day() -> None:
    tables = [info("a", 0), info("a", -1), info("a", 1)]
    assert expired_days(tables, as_of=TODAY + timedelta(days=365)) == [1]


def test_a_run_as_of_the_first_days_of_the_calendar_keeps_everything() -> None:
    # as_of minus keep_days falls before date.min: an OverflowError (a 500 from the API) before.
    tables = [info("a", n) for n in (1, 8, 30)]
    assert expired_days(tables, as_of=date.min) == []
    assert expired_days(tables, as_of=date(1, 1, 8)) == []
    assert expired_days([info("a", 1)], as_of=date.max) == [1]


def test_a_held_day_stays_until_its_hold_ends() -> None:
    held = info("a", 20, hold=TODAY + timedelta(days=2))
    assert expired_days([held]) == []
    assert expired_days([held], as_of=TODAY + timedelta(days=3)) == [20]


def test_refuses_past_the_share_and_says_why() -> None:
    tables = [info("a", n) for n in (0, 1, 10, 11)]
    plan = make_plan(tables, SNAPSHOT, TODAY + timedelta(days=9), TODAY, 90, 0.5)
    assert len(plan.expired) == 3 and plan.total == 4
    assert plan.refusal is not None
    assert "3 of 4" in plan.refusal and "MAX_DROP_SHARE" in plan.refusal
    assert make_plan(tables, SNAPSHOT, TODAY, TODAY, 90, 0.5).refusal is None
