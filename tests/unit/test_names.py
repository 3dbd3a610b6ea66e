import re
from datetime import UTC, date, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.db.ddl import owner_days_ddl, shared_ddl
from router.db.names import (
    day_table,
    day_table_regex,
    fold_day_tables,
    owner_days_table,
    parse_day_table,
    parse_segment_table,
    parse_shared_table,
    quote_ident,
    segment_table,
    shared_table,
    shared_table_regex,
)


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
        "audit_o1_20261123\n",
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


@given(st.sampled_from(["audit", "flow"]), st.dates(date(2000, 1, 1), date(2999, 12, 31)))
def test_shared_names_round_trip_and_are_no_day_tables(kind, day) -> None:
    for name, relation in ((shared_table(kind, day), kind), (owner_days_table(day), "owner_days")):
        assert parse_shared_table(name) == (relation, day)
        assert quote_ident(name) == f'"{name}"'
        assert parse_day_table(name) is None
        assert parse_segment_table(name) is None
        assert not re.match(day_table_regex(), name)
        assert re.match(shared_table_regex(), name)


def test_shared_names_read_as_the_design_spells_them() -> None:
    day = date(2026, 11, 23)
    assert shared_table("audit", day) == "audit_shared_20261123"
    assert shared_table("flow", day) == "flow_shared_20261123"
    assert owner_days_table(day) == "owner_days_20261123"


@given(
    st.sampled_from(["audit", "flow"]),
    st.integers(1, 2**63 - 1),
    st.dates(date(2000, 1, 1), date(2999, 12, 31)),
)
def test_no_day_or_segment_table_parses_as_shared(kind, owner_id, day) -> None:
    assert parse_shared_table(day_table(kind, owner_id, day).name) is None
    assert parse_shared_table(segment_table(kind, day).strip('"')) is None
    assert not re.match(shared_table_regex(), day_table(kind, owner_id, day).name)


@pytest.mark.parametrize(
    "name",
    [
        "audit_shared_2026112",
        "audit_shared_20261332",
        "audit_shared_20261123x",
        "audit_shared_20261123_owner_ts_id",
        "xaudit_shared_20261123",
        "flow_shared_",
        "tail_shared_20261123",
        "audit_owner_days_20261123",
        "owner_days_20260230",
        "owner_days_2026-11-23",
        "owner_days",
        "Audit_shared_20261123",
        "audit_shared_20261123\n",
        "audit_o1_20261123",
        "audit_segments_20261123",
    ],
)
def test_other_relations_are_not_shared_tables(name: str) -> None:
    assert parse_shared_table(name) is None


def test_shared_ddl_draws_odd_ids_and_leads_its_indexes_with_the_owner() -> None:
    day = date(2026, 11, 23)
    audit = shared_ddl("audit", day)
    assert "START 1 INCREMENT 2" in audit[0]
    assert audit[0].index("owner_id") < audit[0].index(" id ")
    assert any("(owner_id, ts, id)" in statement for statement in audit)
    assert any("(ts, owner_id, id)" in statement for statement in audit)
    flow = " ".join(shared_ddl("flow", day))
    assert "START 1 INCREMENT 2" in flow
    assert "UNIQUE NULLS NOT DISTINCT (owner_id, src_ip, dst_ip, src_port, dst_port, proto)" in flow
    assert "(owner_id, first_seen, id)" in flow
    assert "(owner_id, (id % 256), first_seen)" in flow
    assert "PRIMARY KEY (owner_id, kind)" in owner_days_ddl(day)[0]
