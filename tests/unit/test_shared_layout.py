"""The SQL source of an owner-day in both layouts (router/compaction/layout.py, heap_rows;
docs/architecture.md, "Reading both layouts") and the plans' split of shared and own rows
(router/routing/search_plan.py). The answers are tested against PostgreSQL in
tests/integration/test_shared_reads.py; here, the shape the planner needs."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import date

from router.compaction import layout
from router.db.names import day_table
from router.routing.search_plan import plan_search

DAY = date(2026, 11, 23)
OWN = day_table("audit", 42, DAY)
BOTH = replace(OWN, shared=True)
SHARED = replace(OWN, own=False, shared=True)
PACKED_BOTH = replace(BOTH, compacted=True)


def branches(text: str) -> list[str]:
    inner = re.search(r"FROM \((.*)\) AS rows WHERE", text)
    assert inner is not None, text
    return inner.group(1).split(" UNION ALL ")


def test_an_owner_day_in_both_places_or_shared_is_identified_as_its_table() -> None:
    assert BOTH == OWN == SHARED and hash(BOTH) == hash(OWN)
    assert BOTH.shared_name == "audit_shared_20261123"
    assert BOTH.shared_quoted == '"audit_shared_20261123"'


def test_an_own_table_alone_is_read_as_it_always_was() -> None:
    assert layout.heap(OWN) == OWN.quoted
    assert layout.source(OWN) == OWN.quoted


def test_the_branches_have_no_where_so_that_the_union_is_flattened() -> None:
    for table in (BOTH, SHARED):
        text = layout.heap(table)
        assert text.startswith("(SELECT ") and text.endswith(f"AS {OWN.quoted}")
        parts = branches(text)
        assert len(parts) == (2 if table.own else 1)
        assert all(" WHERE " not in part for part in parts), parts
        assert text.endswith(f"WHERE owner_id = 42) AS {OWN.quoted}")
        assert (f"FROM {OWN.quoted}" in text) == table.own
        assert '"audit_shared_20261123"' in parts[-1]


def test_the_own_condition_binds_the_own_branch_alone() -> None:
    """A compacted own table's late rows: its condition holds of its rows, never of the shared
    table's (which its snapshot says nothing about)."""
    text = layout.heap(PACKED_BOTH, layout.late(PACKED_BOTH))
    assert f"AND (shared OR ({layout.late(PACKED_BOTH)}))" in text
    parts = branches(text)
    assert parts[0].endswith("false AS shared FROM " + OWN.quoted)
    assert parts[1].startswith("SELECT id, ts, content, attrs, created_xid, owner_id, true")


def test_a_flow_owner_day_reads_its_shared_flows() -> None:
    flows = replace(day_table("flow", 7, DAY), shared=True)
    text = layout.heap(flows)
    assert '"flow_shared_20261123"' in text and "merged_xid" in text
    assert text.endswith('WHERE owner_id = 7) AS "flow_s7_20261123"')


def test_a_plan_splits_into_the_shared_rows_and_the_own_tables() -> None:
    other = day_table("audit", 43, DAY)
    plan = plan_search(
        [("s1", BOTH), ("s1", other), ("s2", SHARED), ("s3", PACKED_BOTH)],
        [DAY],
        {"s1": "active", "s2": "active", "s3": "active"},
    )
    shared = plan.shared_rows()
    assert [
        (t.shard, [(x.owner_id, x.own, x.shared, x.compacted) for x in t.tables])
        for t in shared.targets
    ] == [
        ("s1", [(42, False, True, False)]),
        ("s2", [(42, False, True, False)]),
        ("s3", [(42, False, True, False)]),
    ]
    own = plan.own_rows()
    assert [
        (t.shard, [(x.owner_id, x.own, x.shared, x.compacted) for x in t.tables])
        for t in own.targets
    ] == [
        ("s1", [(42, True, False, False), (43, True, False, False)]),
        ("s3", [(42, True, False, True)]),
    ]


def test_a_plan_names_its_tables_whose_shared_rows_are_compacted() -> None:
    """count=estimate answers these from their shard-days' segments."""
    packed_shared = replace(SHARED, shared_compacted=True)
    heap_only = replace(OWN, shared_compacted=True)  # no shared rows: nothing to sample
    plan = plan_search(
        [("s1", BOTH), ("s2", packed_shared), ("s3", heap_only)],
        [DAY],
        {"s1": "active", "s2": "active", "s3": "active"},
    )
    assert plan.shared_compacted() == {("s2", packed_shared.name)}
    assert plan.shared_rows().shared_compacted() == {("s2", packed_shared.name)}
    assert plan.own_rows().shared_compacted() == frozenset()
