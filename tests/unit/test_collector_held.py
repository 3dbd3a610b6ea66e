"""Held data sets (router/collector/held.py): bounded per exporter and over all exporters (the
exporter holding most gives way first), stale ones dropped, every drop counted."""

from __future__ import annotations

from router.collector.held import HeldSet, HeldSets


def _set(size: int, at: float = 0.0, template_id: int = 300) -> HeldSet:
    return HeldSet(1, template_id, 10, b"x" * size, 0, None, at)


def test_all_exporters_together_are_bounded_the_largest_giving_way() -> None:
    held = HeldSets(hold_s=60, max_bytes_per_exporter=1000, max_bytes=2500)
    for n in range(3):
        held.hold(f"203.0.113.{n}", _set(800))
    held.hold("203.0.113.0", _set(150))  # 950 there: the largest
    assert held.total_bytes <= 2500
    assert held.held("203.0.113.0") == 1 and held.held("203.0.113.1") == 1
    assert held.expire(0.0) == {"203.0.113.0": 1}


def test_a_flood_of_sources_stays_within_the_bound() -> None:
    held = HeldSets(hold_s=60, max_bytes_per_exporter=10_000, max_bytes=5_000)
    for n in range(1000):
        held.hold(f"10.0.{n // 256}.{n % 256}", _set(100))
        assert held.total_bytes <= 5_000
    assert sum(held.expire(0.0).values()) == 1000 - 50


def test_release_and_staleness_keep_the_total_true() -> None:
    held = HeldSets(hold_s=5, max_bytes_per_exporter=10_000)
    held.hold("a", _set(100, at=0.0, template_id=300))
    held.hold("a", _set(200, at=1.0, template_id=301))
    held.hold("b", _set(300, at=2.0))
    assert [s.template_id for s in held.release("a", 1, 301)] == [301]
    assert held.total_bytes == 400
    assert held.expire(5.5) == {"a": 1}
    assert held.total_bytes == 300
    assert held.expire(100.0) == {"b": 1}
    assert held.total_bytes == 0
