"""The pure parts of reading compacted owner-days (router/compaction/layout.py, the plan's
layout): a table's layout is not part of its identity; heap statements do not change; the
cursor folded onto a segment's bounds keeps exactly the segments that hold a row after the
cursor (checked against the row-by-row keyset, evaluated in Python)."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, date, datetime
from typing import Any

import pytest

from router.compaction import layout
from router.db.names import day_table
from router.routing.search_plan import plan_search
from router.search import sql
from router.search.cursor import Position
from router.search.query import AuditQuery, FlowQuery, Keys, Window
from router.search.snapshot import ShardSnapshot

DAY = date(2026, 11, 23)
HEAP = day_table("audit", 42, DAY)
PACKED = replace(HEAP, compacted=True)
WINDOW = Window(datetime(2026, 11, 23, tzinfo=UTC), datetime(2026, 11, 24, tzinfo=UTC))


def query(*patterns: str, match: Any = "substring") -> AuditQuery:
    return AuditQuery(Keys.of(["o"]), WINDOW, patterns, match, "asc")


def test_the_layout_is_not_part_of_a_tables_identity() -> None:
    assert PACKED == HEAP and hash(PACKED) == hash(HEAP) and not PACKED < HEAP
    assert {PACKED} == {HEAP} and PACKED.name == HEAP.name


def test_the_plan_keeps_each_tables_layout() -> None:
    other = day_table("audit", 7, DAY)
    plan = plan_search([("s1", PACKED), ("s1", other), ("s2", HEAP)], [DAY], {"s1": "active"})
    assert plan.compacted() == {("s1", HEAP.name)}
    assert [t.compacted for t in plan.only(plan.compacted()).targets[0].tables] == [True]
    assert [t.compacted for t in plan.without(plan.compacted()).targets[0].tables] == [False]


@pytest.mark.parametrize("descending", [False, True])
def test_heap_statements_name_no_segment(descending: bool) -> None:
    after = Position(WINDOW.start, "s1", 42, 5)
    for text, _ in (
        sql.page_sql(query("abc"), [HEAP, HEAP], "s1", after, descending, 10),
        sql.count_sql(query(), [HEAP]),
        sql.export_sql(query("abc"), [HEAP], descending, lambda _t, _a: "ts, id"),
    ):
        assert "segments" not in text and "compacted_days" not in text


def test_a_compacted_page_reads_late_rows_and_candidate_segments() -> None:
    text, values = sql.page_sql(query("abc", "de"), [PACKED], "s1", None, True, 10)
    assert "NOT pg_visible_in_snapshot(created_xid" in text
    assert 'FROM "audit_segments_20261123" AS s CROSS JOIN LATERAL' in text
    assert "ORDER BY s.seq DESC, u.ord DESC" in text
    assert text.count("shardlog_may_contain(s.grams") == 2
    assert values.count("abc") == 2  # the content's condition and the filter's
    regex, _ = sql.page_sql(query("a.c", match="regex"), [PACKED], "s1", None, False, 10)
    assert "shardlog_may_contain" not in regex


def test_a_count_opens_no_segment_wholly_inside_an_unconditional_window() -> None:
    plain, _ = sql.count_sql(query(), [PACKED])
    assert "sum(s.rows)" in plain and "AND NOT (s.first_ts >=" in plain
    for text, _ in (
        sql.count_sql(query("abc"), [PACKED]),
        sql.count_sql(query(), [PACKED], ShardSnapshot.parse("10:20:")),
    ):
        assert "sum(s.rows)" not in text and "shardlog_unpack_audit" in text


def test_a_compacted_flow_day_reads_its_flow_segments_and_its_merged_rows() -> None:
    flows = replace(day_table("flow", 3, DAY), compacted=True)
    text = layout.source(flows, ("$1", "$2"))
    assert text.startswith(f"(SELECT {layout.FLOW_TABLE_COLUMNS} FROM {flows.quoted}")
    assert "flow_segments_20261123" in text and "shardlog_unpack_flow(s.block)" in text
    # A row merged into after the compaction's snapshot is read from the heap.
    assert "pg_visible_in_snapshot(merged_xid" in layout.late(flows)
    assert "merged_xid" not in layout.late(PACKED)
    page, values = sql.page_sql(
        FlowQuery(Keys.of(["sw"]), WINDOW, None, None, None, None, None, None, False, "asc"),
        [flows],
        "s1",
        Position(WINDOW.start, "s1", 3, 5),
        False,
        10,
    )
    # Every parameter is read (a flow segment's unpack takes no range).
    assert all(f"${n}" in page for n in range(1, len(values) + 1))


def _evaluate(condition: str, values: list[Any], row: dict[str, Any]) -> bool:
    """A condition of sql.keyset or layout.segment_keyset, in Python: row comparisons of
    tuples are lexicographic in both languages."""
    text = condition.replace("s.", "")
    for n in range(len(values), 0, -1):
        text = text.replace(f"${n}", f"p{n}")
    return bool(eval(text, {}, {**row, **{f"p{n + 1}": v for n, v in enumerate(values)}}))


@pytest.mark.parametrize("seed", range(300))
def test_the_folded_cursor_keeps_exactly_the_segments_with_a_row_after_it(seed: int) -> None:
    rng = random.Random(seed)
    rows = sorted({(rng.randrange(6), rng.randrange(20)) for _ in range(rng.randrange(1, 6))})
    shard, owner = rng.choice(["s1", "s2"]), rng.choice([1, 2])
    after = Position(rng.randrange(7), rng.choice(["s1", "s2"]), rng.choice([1, 2]), 10)  # type: ignore[arg-type]
    descending = rng.random() < 0.5
    params = sql.Params()
    per_row = sql.keyset(after, shard, owner, "ts", descending, params)
    wanted = any(_evaluate(per_row, params.values, {"ts": t, "id": i}) for t, i in rows)
    params = sql.Params()
    folded = layout.segment_keyset(after, shard, owner, descending, params.add)
    bounds = {
        "first_ts": rows[0][0],
        "first_id": rows[0][1],
        "last_ts": rows[-1][0],
        "last_id": rows[-1][1],
    }
    assert _evaluate(folded, params.values, bounds) == wanted


def test_the_source_of_a_compacted_day_has_the_day_tables_columns() -> None:
    text = layout.source(PACKED, ("$1", "$2"))
    assert text.startswith(f"(SELECT {layout.AUDIT_TABLE_COLUMNS} FROM {HEAP.quoted}")
    assert text.endswith(f"AND s.last_ts >= $1 AND s.first_ts < $2) AS {HEAP.quoted}")
    assert layout.source(HEAP) == HEAP.quoted
