from datetime import UTC, date, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.db.names import day_table, fold_day_tables, parse_day_table, quote_ident


@given(
    st.sampled_from(["audit", "flow"]),
    st.integers(1, 2**63 - 1),
    st.dates(date(2000, 1, 1), date(2999, 12, 31)),
)
def test_names_round_trip_and_fit(kind, owner_id, day) -> None:
    table = day_table(kind, owner_id, day)
    assert len(table.name.encode()) <= 63
    assert parse_day_table(table.name) == table
    assert table.quoted == f'"{table.name}"'


def test_distinct_owners_never_share_a_table() -> None:
    day = date(2026, 11, 23)
    names = {day_table("audit", owner, day).name for owner in range(1, 5000)}
    assert len(names) == 4999
    assert day_table("audit", 1, day).name != day_table("flow", 1, day).name


def test_datetime_is_taken_as_its_date() -> None:
    ts = datetime(2026, 11, 23, 23, 59, tzinfo=UTC)
    assert day_table("flow", 7, ts).name == "flow_s7_20261123"


@pytest.mark.parametrize(
    "name",
    [
        "audit_o0_20261123",
        "audit_o1_2026112",
        "audit_o1_20261332",
        "other",
        "audit_o01_20261123",
        "flow_s1_20261123x",
    ],
)
def test_other_relations_are_not_day_tables(name: str) -> None:
    assert parse_day_table(name) is None


@pytest.mark.parametrize("name", ['x"; DROP TABLE t; --', "Upper", "", "a" * 64, "ü"])
def test_quote_refuses_anything_unexpected(name: str) -> None:
    with pytest.raises(ValueError):
        quote_ident(name)


def test_owner_ids_must_be_positive() -> None:
    with pytest.raises(ValueError):
        day_table("audit", 0, date(2026, 1, 1))


def test_statements_on_any_day_table_fold_to_one_text() -> None:
    copies = {
        fold_day_tables(f'COPY "public"."{day_table("audit", owner, day).name}"(ts) FROM STDIN')
        for owner, day in ((1, date(2026, 1, 1)), (42, date(2026, 11, 23)))
    }
    assert copies == {'COPY "public"."audit_oN_YYYYMMDD"(ts) FROM STDIN'}
    assert fold_day_tables('SELECT 1 FROM "flow_s7_20261123" t') == (
        'SELECT 1 FROM "flow_sN_YYYYMMDD" t'
    )


@pytest.mark.parametrize(
    "text",
    ["CREATE INDEX audit_o1_20260101_ts_idx", "SELECT * FROM xaudit_o1_20260101", "tail_log"],
)
def test_folding_leaves_other_identifiers_alone(text: str) -> None:
    assert fold_day_tables(text) == text
