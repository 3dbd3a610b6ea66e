"""Which shared days a retention run drops, as a value: each kind's shared table by its group's
policy of that kind, the owner_days table only with the last shared table of its day, never
today, never for an owner's own policy."""

from __future__ import annotations

from datetime import date, timedelta

from router.catalog.snapshot import CatalogSnapshot, RetentionPolicy
from router.retention.shared_days import SharedDay, expired_shared, weights

TODAY = date(2026, 11, 23)
SNAPSHOT = CatalogSnapshot(
    version=1,
    retention=(
        RetentionPolicy(1, "audit", "g1", None, 7),
        RetentionPolicy(2, "flow", "g1", None, 3),
        # An owner's own policy decides nothing of a shared day.
        RetentionPolicy(3, "audit", "g1", "short", 1),
        RetentionPolicy(4, "flow", "g1", "long", 60),
    ),
)
EVERYTHING = {"audit", "flow", "owner_days"}


def shared_day(days_ago: int, relations=EVERYTHING, group="g1", owner_days=5) -> SharedDay:
    return SharedDay(
        "s1",
        group,
        TODAY - timedelta(days=days_ago),
        set(relations),
        8192,
        owner_days,
        {kind for kind in ("audit", "flow") if kind in relations},
    )


def dropped(found, kind_scope=None, as_of=TODAY, default_keep=30):
    return {
        (TODAY - e.entry.day).days: (e.relations, e.kinds)
        for e in expired_shared(found, SNAPSHOT, as_of, TODAY, default_keep, kind_scope)
    }


def test_each_kind_expires_by_its_group_policy_and_owner_days_goes_with_the_last() -> None:
    found = [shared_day(n) for n in (0, 2, 3, 4, 7, 8)]
    assert dropped(found) == {
        4: (("flow",), ("flow",)),
        7: (("flow",), ("flow",)),
        8: (("audit", "flow", "owner_days"), ("audit", "flow")),
    }


def test_owner_days_left_alone_goes_when_its_day_expires() -> None:
    found = [shared_day(8, {"owner_days"}), shared_day(9, {"audit", "owner_days"})]
    assert dropped(found) == {
        8: (("owner_days",), ()),
        9: (("audit", "owner_days"), ("audit",)),
    }


def test_a_kind_scope_leaves_the_other_kind_and_the_fence() -> None:
    assert dropped([shared_day(8)], kind_scope="audit") == {8: (("audit",), ("audit",))}


def test_groups_without_a_policy_keep_the_default_and_today_is_never_dropped() -> None:
    found = [shared_day(29, group="g2"), shared_day(31, group="g2")]
    assert set(dropped(found)) == {31}
    assert dropped([shared_day(0)], as_of=TODAY + timedelta(days=400)) == {}
    assert set(dropped([shared_day(-1), shared_day(1)], as_of=TODAY + timedelta(days=400))) == {1}


def test_a_shared_day_weighs_as_its_owner_days() -> None:
    found = [shared_day(1, owner_days=100), shared_day(8, owner_days=40)]
    expired = expired_shared(found, SNAPSHOT, TODAY, TODAY, 30, None)
    assert weights(found, expired) == (140, 40)


def test_a_group_that_archives_a_kind_archives_that_kinds_shared_table_first() -> None:
    archiving = CatalogSnapshot(
        version=1,
        retention=(
            RetentionPolicy(1, "audit", "g1", None, 7, archive=True),
            RetentionPolicy(2, "flow", "g1", None, 3),
            # An owner's archive is its own: the shared day follows its group.
            RetentionPolicy(3, "flow", "g1", "someone", 3, archive=True),
        ),
    )
    found = [shared_day(10), shared_day(10, group="g2"), shared_day(5)]
    planned = {
        (e.entry.group, (TODAY - e.entry.day).days): (e.relations, e.archive)
        for e in expired_shared(found, archiving, TODAY, TODAY, 30, None)
    }
    assert planned == {
        ("g1", 10): (("audit", "flow", "owner_days"), ("audit",)),
        ("g1", 5): (("flow",), ()),
    }
