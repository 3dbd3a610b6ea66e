"""The coordinator's statements and names for shared tables (router/search/sql.py
``Coordinated``, router/db/names.py ``shared_parent`` / ``shared_foreign_table``)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from router.db.names import (
    MAX_IDENTIFIER_BYTES,
    parent_table,
    shared_foreign_table,
    shared_parent,
)
from router.search import sql
from router.search.cursor import Position
from router.search.query import AuditQuery, Keys, Window

START = datetime(2026, 11, 20, tzinfo=UTC)
QUERY = AuditQuery(Keys.of(["a"]), Window(START, START + timedelta(days=1)), (), "substring", "asc")


def test_shared_names_are_no_owners_and_fit_an_identifier() -> None:
    assert shared_parent("audit") == 'fdw."audit_shared"'
    assert shared_parent("flow") not in {parent_table("flow", n) for n in (1, 2**63 - 1)}
    name = shared_foreign_table("flow", date(2026, 11, 20), "x" * 63)
    assert name.startswith('fdw."flow_shared_20261120_')
    assert len(name[len('fdw."') : -1].encode()) <= MAX_IDENTIFIER_BYTES
    assert name != shared_foreign_table("flow", date(2026, 11, 20), "y" * 63)


def test_owners_of_both_layouts_read_their_parents_and_the_shared_parent_by_owner() -> None:
    sources = sql.Coordinated([parent_table("audit", 7)], shared_parent("audit"), [7, 9])
    text, params = sql.fdw_page_sql(QUERY, sources, None, False, 11)
    assert text.count(" UNION ALL ") == 1
    assert 'FROM fdw."audit_o7" AS p' in text and 'FROM fdw."audit_shared" AS p' in text
    assert [7, 9] in params
    index = params.index([7, 9]) + 1
    assert f"p.owner_id = ANY(${index}::bigint[])" in text
    counted, values = sql.fdw_count_sql(QUERY, sources)
    assert 'fdw."audit_shared" AS p WHERE p.owner_id = ANY(' in counted and [7, 9] in values


def test_the_keyset_compares_a_shared_row_by_its_own_owner_id() -> None:
    after = Position(START, "shard01", 9, 42)
    shared_only = sql.Coordinated([], shared_parent("audit"), [9])
    text, _ = sql.fdw_page_sql(QUERY, shared_only, after, False, 11)
    assert "c.owner_id" not in text  # a shared child has no owner in fdw.children
    assert '(p.ts, c.shard COLLATE "C", p.owner_id, p.id) >' in text
    own_only = sql.Coordinated([parent_table("audit", 9)], shared_parent("audit"), [])
    text, _ = sql.fdw_page_sql(QUERY, own_only, after, True, 11)
    assert "audit_shared" not in text
    assert '(p.ts, c.shard COLLATE "C", c.owner_id, p.id) <' in text
