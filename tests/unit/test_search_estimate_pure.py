"""count=estimate's decisions and arithmetic (router/search/estimate.py), and the flow sample
index that new day tables and the shard migration both build."""

import re
from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.db import ddl
from router.db.migrate import load_migrations
from router.db.names import day_table, day_table_regex
from router.search import estimate
from router.settings import REPO_ROOT, SearchSettings

LIMITS = estimate.Limits.of(SearchSettings())


def tally_of(hits: int, in_range: float, readable: float, fraction: float) -> estimate.Tally:
    read = round(readable * fraction)
    return estimate.Tally(hits, read, hits / fraction, in_range, readable)


def test_a_sample_with_enough_matches_is_the_answer() -> None:
    found = tally_of(LIMITS.target_hits, 5e6, 5e6, 0.004)
    assert estimate.next_step(found, 1.0, LIMITS) == estimate.Step("done")


def test_a_range_of_few_rows_is_counted() -> None:
    found = tally_of(10, LIMITS.count_below_rows, 1e7, 0.004)
    assert estimate.next_step(found, 1.0, LIMITS).action == "count"


def test_few_matches_ask_for_a_sample_aimed_past_the_target() -> None:
    found = tally_of(1_000, 1e6, 1e6, 0.004)
    step = estimate.next_step(found, 1.0, LIMITS)
    assert step.action == "sample"
    expected_hits = found.hits * step.fraction / found.fraction
    assert expected_hits == pytest.approx(LIMITS.target_hits * estimate.GROWTH_MARGIN)


def test_the_larger_sample_stays_within_the_rows_it_may_read() -> None:
    found = tally_of(3, 1e8, 1e8, 0.0005)
    step = estimate.next_step(found, 1.0, LIMITS)
    assert step == estimate.Step("sample", LIMITS.max_sample_rows / 1e8)


def test_flows_grow_no_further_than_the_sample_index_reaches() -> None:
    found = tally_of(100, 1e6, 1e6, estimate.FLOW_FRACTIONS[0])
    step = estimate.next_step(found, estimate.FLOW_FRACTIONS[1], LIMITS)
    assert step == estimate.Step("sample", estimate.FLOW_FRACTIONS[1])
    assert estimate.flow_classes(step.fraction) == ddl.FLOW_SAMPLE_STRIDE


def test_a_sample_nearly_as_large_as_the_range_is_a_count() -> None:
    found = tally_of(200, 80_000, 100_000, 0.05)
    assert estimate.next_step(found, 1.0, LIMITS).action == "count"


def test_a_narrow_range_of_a_large_table_is_counted_rather_than_sampled_widely() -> None:
    """Most pages of a day hold no row of an hour: sampling enough of them to find the hour's
    matches would read more rows than counting the hour."""
    found = tally_of(300, 100_000, 2_400_000, 0.004)
    assert estimate.next_step(found, 1.0, LIMITS).action == "count"
    assert estimate.next_step(tally_of(300, 1e6, 1.2e6, 0.004), 1.0, LIMITS).action == "sample"


def test_a_sample_that_cannot_grow_is_the_answer() -> None:
    found = tally_of(100, 1e6, 1e6, estimate.FLOW_FRACTIONS[1])
    step = estimate.next_step(found, estimate.FLOW_FRACTIONS[1], LIMITS)
    assert step == estimate.Step("done")


@given(st.floats(1e-6, 1.0))
def test_flow_classes_read_at_least_the_fraction_asked_within_the_index(fraction) -> None:
    classes = estimate.flow_classes(fraction)
    assert 1 <= classes <= ddl.FLOW_SAMPLE_STRIDE
    assert classes / ddl.FLOW_SAMPLE_CLASSES >= min(fraction, 1 / ddl.FLOW_SAMPLE_STRIDE) - 1e-12


def test_audit_parts_scale_by_pages_over_pages_read() -> None:
    part = estimate.audit_part(1000, 0.4, hits=30, in_range=50, read=52, pages_read=4)
    assert (part.hits, part.weight) == (30, 250.0)
    whole = estimate.audit_part(12, 100.0, hits=7, in_range=9, read=150, pages_read=12)
    assert whole.weight == 1.0
    assert estimate.audit_part(5000, 0.4, 0, 0, 0, 0).weight == 0.0


@given(
    st.lists(st.tuples(st.integers(0, 500), st.integers(0, 500), st.integers(1, 64)), max_size=12)
)
def test_a_tally_adds_up_its_parts(raw) -> None:
    parts = [estimate.flow_part(min(h, r), r, classes) for h, r, classes in raw]
    found = estimate.tally(parts)
    assert found.hits == sum(p.hits for p in parts)
    assert found.value == pytest.approx(sum(p.hits * p.weight for p in parts))
    assert found.value <= found.in_range + 1e-6
    assert 0 < found.fraction <= 1


def test_the_migration_builds_the_sample_index_new_flow_tables_get() -> None:
    (migration,) = [m for m in load_migrations(REPO_ROOT / "schema", "shard") if "sample" in m.name]
    table = day_table("flow", 7, date(2026, 11, 23))
    definition = ddl.flow_sample_index(table).split(f" ON {table.quoted} ", 1)[1]
    call = migration.sql.split("EXECUTE format(", 1)[1].split("table_name ||", 1)[0]
    migrated = "".join(re.findall(r"'([^']*)'", call)).replace("%%", "%")
    assert migrated == f"CREATE INDEX IF NOT EXISTS %I ON %s {definition}"
    assert day_table_regex().replace("(audit_o|flow_s)", "(flow_s)") in migration.sql
