"""count=estimate's arithmetic and decisions (router/search/estimate.py), checked against
simulated samples of known populations; and the flow sample index that new day tables and the
shard migration both build."""

import math
import re
from datetime import date

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.db import ddl
from router.db.migrate import load_migrations
from router.db.names import day_table, day_table_regex
from router.search import estimate
from router.settings import REPO_ROOT, SearchSettings

LIMITS = estimate.Limits.of(SearchSettings())


def population(pages: int, in_range_share: float, hit_rate: float, seed: int) -> np.ndarray:
    """Per page (matching, in range, rows) of a day table of 13-row pages in time order: the
    range is the first ``in_range_share`` of its pages, where rows match at ``hit_rate``."""
    rng = np.random.default_rng(seed)
    rows = np.full(pages, 13)
    in_range = np.where(np.arange(pages) < pages * in_range_share, rows, 0)
    hits = rng.binomial(in_range, hit_rate)
    return np.stack([hits, in_range, rows], axis=1)


def sample(table: np.ndarray, share: float, rng: np.random.Generator) -> estimate.PageSums:
    """What audit_sample_sql answers for a TABLESAMPLE SYSTEM of ``share`` of the pages."""
    drawn = table[rng.random(len(table)) < share]
    h, r, n = drawn[:, 0].astype(float), drawn[:, 1].astype(float), drawn[:, 2]
    return estimate.PageSums(
        len(table),
        share * 100,
        len(drawn),
        h.sum(),
        (h * h).sum(),
        r.sum(),
        (r * r).sum(),
        (h * r).sum(),
        int(n.sum()),
    )


@pytest.mark.parametrize("in_range_share", [1.0, 0.5, 0.1])
def test_the_stated_error_is_the_error_of_repeated_samples(in_range_share) -> None:
    """Over 400 samples of three tables, the estimates' spread is what each one states, and
    the ratio estimate on the true rows in range beats scaling by pages for a part of a day."""
    tables = [population(40_000, in_range_share, 0.2, seed) for seed in range(3)]
    truth = sum(int(t[:, 0].sum()) for t in tables)
    rows_in_range = sum(int(t[:, 1].sum()) for t in tables)
    rng = np.random.default_rng(9)
    by_pages, by_ratio, stated_pages, stated_ratio = [], [], [], []
    for _ in range(400):
        found = estimate.audit_tally([sample(t, 0.01, rng) for t in tables])
        scaled = estimate.estimate(found, None)
        ratio = estimate.estimate(found, rows_in_range)
        by_pages.append(scaled.value / truth - 1)
        by_ratio.append(ratio.value / truth - 1)
        stated_pages.append(scaled.error)
        stated_ratio.append(ratio.error)
    for errors, stated in ((by_pages, stated_pages), (by_ratio, stated_ratio)):
        assert abs(np.mean(errors)) < 0.2 * np.std(errors) + 0.002  # no bias
        assert np.std(errors) == pytest.approx(np.mean(stated), rel=0.2)
    if in_range_share < 1:
        assert np.std(by_ratio) < 0.7 * np.std(by_pages)


def test_a_table_read_whole_is_exact() -> None:
    table = population(10, 1.0, 0.3, 1)
    found = estimate.audit_tally([sample(table, 1.0, np.random.default_rng(1))])
    guess = estimate.estimate(found, None)
    assert (guess.value, guess.error) == (table[:, 0].sum(), 0.0)


def test_the_planner_is_set_aside_when_the_sample_contradicts_it() -> None:
    """A table that grew since its last ANALYZE: the planner sees a tenth of the rows."""
    table = population(40_000, 0.2, 0.2, 2)
    found = estimate.audit_tally([sample(table, 0.01, np.random.default_rng(3))])
    rows_in_range = int(table[:, 1].sum())
    assert estimate.estimate(found, rows_in_range / 10).value == found.matches.value
    close = estimate.estimate(found, rows_in_range)
    assert close.value == pytest.approx(rows_in_range * found.matches.value / found.in_range.value)


def test_no_match_sampled_is_unsure_unless_everything_was_read() -> None:
    nothing = population(1_000, 1.0, 0.0, 4)
    found = estimate.audit_tally([sample(nothing, 0.05, np.random.default_rng(4))])
    assert estimate.estimate(found, None) == estimate.Estimate(0.0, math.inf, 13_000)
    whole = estimate.audit_tally([sample(nothing, 1.0, np.random.default_rng(4))])
    assert estimate.estimate(whole, None).error == 0.0


def test_flow_samples_are_binomial() -> None:
    found = estimate.flow_tally([(3_000, 10_000), (1_000, 5_000)], classes=2)
    guess = estimate.estimate(found, None)
    share = 2 / ddl.FLOW_SAMPLE_CLASSES
    assert guess.value == pytest.approx(4_000 / share)
    assert guess.error == pytest.approx(math.sqrt((1 - share) / 4_000))
    assert found.fraction == pytest.approx(share)


def tally(read: int, readable: float) -> estimate.Tally:
    nothing = estimate.Total(0.0, 0.0)
    return estimate.Tally(0, read, nothing, nothing, readable)


def test_a_sure_enough_estimate_is_the_answer() -> None:
    guess = estimate.Estimate(1e6, LIMITS.target_error, 5e6)
    assert estimate.next_step(tally(20_000, 5e6), guess, 1.0, LIMITS) == estimate.Step("done")


def test_a_range_of_few_rows_is_counted() -> None:
    guess = estimate.Estimate(1e3, 0.2, LIMITS.count_below_rows)
    assert estimate.next_step(tally(4_000, 1e7), guess, 1.0, LIMITS).action == "count"


def test_the_larger_sample_aims_past_the_target_error() -> None:
    guess = estimate.Estimate(2e5, 2 * LIMITS.target_error, 1e6)
    step = estimate.next_step(tally(4_000, 1e6), guess, 1.0, LIMITS)
    assert step == estimate.Step("sample", 0.004 * estimate.GROWTH_MARGIN * 4)


def test_the_larger_sample_stays_within_the_rows_it_may_read() -> None:
    guess = estimate.Estimate(100, 0.5, 1e8)
    step = estimate.next_step(tally(50_000, 1e8), guess, 1.0, LIMITS)
    assert step == estimate.Step("sample", LIMITS.max_sample_rows / 1e8)


def test_flows_grow_no_further_than_the_sample_index_reaches() -> None:
    guess = estimate.Estimate(1e4, 0.1, 1e6)
    found = tally(4_000, 1e6 + 0.0)
    ceiling = estimate.FLOW_FRACTIONS[1]
    assert estimate.next_step(found, guess, ceiling, LIMITS) == estimate.Step("sample", ceiling)
    assert estimate.flow_classes(ceiling) == ddl.FLOW_SAMPLE_STRIDE
    saturated = tally(round(1e6 * ceiling), 1e6)
    assert estimate.next_step(saturated, guess, ceiling, LIMITS) == estimate.Step("done")


def test_a_narrow_range_of_a_large_table_is_counted_rather_than_sampled_widely() -> None:
    """Most pages of a day hold no row of its hour: a sample that finds enough of the hour's
    matches reads more rows than counting the hour does."""
    guess = estimate.Estimate(8e4, 0.05, 1e5)
    assert estimate.next_step(tally(9_600, 2.4e6), guess, 1.0, LIMITS).action == "count"
    wide = estimate.Estimate(8e5, 0.05, 1e6)
    assert estimate.next_step(tally(4_800, 1.2e6), wide, 1.0, LIMITS).action == "sample"


@given(st.floats(1e-6, 1.0))
def test_flow_classes_read_at_least_the_fraction_asked_within_the_index(fraction) -> None:
    classes = estimate.flow_classes(fraction)
    assert 1 <= classes <= ddl.FLOW_SAMPLE_STRIDE
    assert classes / ddl.FLOW_SAMPLE_CLASSES >= min(fraction, 1 / ddl.FLOW_SAMPLE_STRIDE) - 1e-12


def test_the_migration_builds_the_sample_index_new_flow_tables_get() -> None:
    (migration,) = [m for m in load_migrations(REPO_ROOT / "schema", "shard") if "sample" in m.name]
    table = day_table("flow", 7, date(2026, 11, 23))
    definition = ddl.flow_sample_index(table).split(f" ON {table.quoted} ", 1)[1]
    call = migration.sql.split("EXECUTE format(", 1)[1].split("table_name ||", 1)[0]
    migrated = "".join(re.findall(r"'([^']*)'", call)).replace("%%", "%")
    assert migrated == f"CREATE INDEX IF NOT EXISTS %I ON %s {definition}"
    assert day_table_regex().replace("(audit_o|flow_s)", "(flow_s)") in migration.sql


def test_a_larger_sample_keeps_to_what_the_first_found_of_the_planner() -> None:
    """Whether the planner's rows in the range are stale is decided once, on the first sample:
    a larger sample whose rows in range stray past the tolerance by chance still takes the
    ratio estimate on the planner's rows, and one that found them stale keeps its own."""
    table = population(40_000, 0.5, 0.2, 5)
    found = estimate.audit_tally([sample(table, 0.05, np.random.default_rng(6))])
    rows_in_range = int(table[:, 1].sum())
    astray = found.in_range.value - 4 * math.sqrt(found.in_range.variance)
    assert not estimate.estimate(found, astray).by_planner
    kept = estimate.estimate(found, astray, planner_agreed=True)
    assert kept.by_planner
    assert kept.value == pytest.approx(astray * found.matches.value / found.in_range.value)
    stale = estimate.estimate(found, rows_in_range, planner_agreed=False)
    assert not stale.by_planner and stale.value == found.matches.value
