from datetime import date

from router.ingest.owner_days import OwnerDayCounts

DAY = date(2026, 3, 10)


def test_counts_add_up_per_owner_day_and_shard() -> None:
    counts = OwnerDayCounts()
    counts.add(1, DAY, "a", 10)
    counts.add(1, DAY, "a", 5)
    counts.add(1, DAY, "b", 7)
    counts.add(2, DAY, "a", 1)
    assert dict(counts.held(1, DAY)) == {"a": 15, "b": 7}
    assert counts.rows(1, DAY) == 22
    assert dict(counts.held(3, DAY)) == {}
    assert counts.rows(3, DAY) == 0


def test_roll_drops_owner_days_before_yesterday() -> None:
    counts = OwnerDayCounts()
    for day in (date(2026, 3, 8), date(2026, 3, 9), DAY):
        counts.add(1, day, "a", 1)
    counts.roll(DAY)
    assert len(counts) == 2
    assert counts.rows(1, date(2026, 3, 8)) == 0
    assert counts.rows(1, date(2026, 3, 9)) == 1


def test_memory_is_bounded() -> None:
    counts = OwnerDayCounts(max_entries=3)
    for owner in range(10):
        counts.add(owner, DAY, "a", 1)
    assert len(counts) <= 3
    assert counts.rows(9, DAY) == 1
