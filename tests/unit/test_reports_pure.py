"""The pure part of reports: parsing and validation, the per-shard SQL, the merge of sorted
partials (property-tested: any split of the rows across shards gives the same groups), top-N
and the external sort."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router.errors import BadRequest
from router.reports.merge import Partial, combine_groups, merge_sorted
from router.reports.order import ExternalSort, top
from router.reports.spec import METRICS, build_spec
from router.reports.sql import partial_sql
from router.search.query import FlowQuery, Keys, Window

START = datetime(2025, 1, 1, tzinfo=UTC)


def flows(days: int = 1, ip_version: int | None = None) -> FlowQuery:
    window = Window(START, START + timedelta(days=days))
    return FlowQuery(
        Keys.of(["sw"]), window, None, None, None, None, ip_version, None, False, "asc"
    )


def spec(**choice: Any) -> Any:
    defaults: dict[str, Any] = {
        "group_by": [],
        "metrics": [],
        "bucket": None,
        "order_by": None,
        "order": "desc",
        "limit": None,
        "format": "json",
    }
    days = choice.pop("days", 1)
    ip_version = choice.pop("ip_version", None)
    return build_spec(
        "flow", ["sw"], flows(days, ip_version), max_buckets=1000, **{**defaults, **choice}
    )


def test_defaults_and_lists() -> None:
    made = spec(group_by=["src_ip/24,dst_port"], metrics=["bytes", "rows"], order_by="packets")
    assert [k.name for k in made.group_by] == ["src_ip/24", "dst_port"]
    assert made.group_by[0].prefix == 24
    assert [m.name for m in made.metrics] == ["bytes", "rows", "packets"]
    assert spec().metrics == (METRICS["flow"]["rows"],)


@pytest.mark.parametrize(
    ("choice", "field"),
    [
        ({"group_by": ["colour"]}, "group_by"),
        ({"group_by": ["owner"]}, "group_by"),
        ({"group_by": ["src_ip", "src_ip/8"]}, "group_by"),
        ({"group_by": ["src_ip/129"]}, "group_by"),
        ({"group_by": ["src_ip/33"], "ip_version": 4}, "group_by"),
        ({"metrics": ["median(bytes)"]}, "metrics"),
        ({"order_by": "colour"}, "order_by"),
        ({"group_by": ["bucket"]}, "bucket"),
        ({"bucket": "1h"}, "bucket"),
        ({"group_by": ["bucket"], "bucket": "2h"}, "bucket"),
        ({"group_by": ["bucket"], "bucket": "1m", "days": 1}, "bucket"),
    ],
)
def test_refusals_name_the_parameter(choice: dict[str, Any], field: str) -> None:
    with pytest.raises(BadRequest) as refused:
        spec(**choice)
    assert refused.value.field == field


def test_bucket_count_is_checked_against_the_limit() -> None:
    assert spec(group_by=["bucket"], bucket="5m", days=3).bucket == timedelta(minutes=5)
    with pytest.raises(BadRequest):
        spec(group_by=["bucket"], bucket="1m", days=1)  # 1441 buckets > 1000


def test_the_shard_statement_groups_and_orders_by_the_key() -> None:
    text, params = partial_sql(
        spec(group_by=["switch", "src_ip/24"], metrics=["bytes", "distinct(dst_ip)"]),
        [("sw", '"flow_s1_20250101"'), ("sw2", '"flow_s2_20250101"')],
    )
    assert text.count("UNION ALL") == 1
    assert text.endswith("GROUP BY 1, 2 ORDER BY 1, 2")
    assert 'report_key COLLATE "C"' in text and "hll_add_agg" in text
    assert "sw" in params and "sw2" in params
    total, _ = partial_sql(spec(), [("sw", '"t"')])
    assert "GROUP BY" not in total


# --- the merge ---------------------------------------------------------------------------


def rows_strategy() -> Any:
    return st.lists(
        st.tuples(st.integers(0, 6), st.integers(0, 3), st.integers(0, 10**12)), max_size=60
    )


async def _stream(items: Iterable[Partial]) -> AsyncIterator[Partial]:
    for item in items:
        yield item


def partials(rows: list[tuple[int, int, int]]) -> list[Partial]:
    """What a shard returns for its rows: groups by key, sorted, with count, sum, min, max."""
    groups: dict[tuple[int, int], list[int]] = {}
    for a, b, value in rows:
        group = groups.setdefault((a, b), [0, 0, value, value])
        group[0] += 1
        group[1] += value
        group[2] = min(group[2], value)
        group[3] = max(group[3], value)
    return [(key, list(groups[key])) for key in sorted(groups)]


async def merged(shards: list[list[Partial]], metric_names: list[str]) -> list[Partial]:
    metrics = [METRICS["flow"][n] for n in metric_names]
    out = []
    async for group in combine_groups(merge_sorted([_stream(p) for p in shards]), metrics):
        out.append(group)
    return out


NAMES = ["rows", "bytes", "min(first_seen)", "max(last_seen)"]


@settings(max_examples=200, deadline=None)
@given(rows=rows_strategy(), shards=st.integers(1, 12), seed=st.integers())
def test_any_split_across_shards_merges_to_the_single_shard_answer(
    rows: list[tuple[int, int, int]], shards: int, seed: int
) -> None:
    rng = random.Random(seed)
    split: list[list[tuple[int, int, int]]] = [[] for _ in range(shards)]
    for row in rows:
        split[rng.randrange(shards)].append(row)
    answer = asyncio.run(merged([partials(part) for part in split], NAMES))
    assert answer == partials(rows)
    assert sum(group[1][0] for group in answer) == len(rows)


def metric_rows(values: list[int]) -> list[dict[str, Any]]:
    return [{"k": n, "bytes": v} for n, v in enumerate(values)]


async def _top(values: list[int], limit: int, descending: bool) -> list[dict[str, Any]]:
    return await top(_stream_rows(metric_rows(values)), METRICS["flow"]["bytes"], descending, limit)


async def _stream_rows(rows: list[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    for row in rows:
        yield row


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.integers(0, 50), max_size=80),
    limit=st.integers(1, 30),
    descending=st.booleans(),
)
def test_top_n_equals_a_full_sort(values: list[int], limit: int, descending: bool) -> None:
    expected = sorted(
        metric_rows(values), key=lambda r: (-r["bytes"] if descending else r["bytes"], r["k"])
    )
    assert asyncio.run(_top(values, limit, descending)) == expected[:limit]


@settings(max_examples=50, deadline=None)
@given(
    values=st.lists(st.integers(0, 10**15), max_size=300),
    budget=st.integers(1, 20_000),
    descending=st.booleans(),
)
def test_the_external_sort_equals_a_full_sort(
    values: list[int], budget: int, descending: bool
) -> None:
    sorter = ExternalSort(METRICS["flow"]["bytes"], descending, budget, None)
    for row in metric_rows(values):
        sorter.add(row)
    if len(values) * 420 > budget and values:
        assert sorter.spilled_runs >= 1
    expected = sorted(
        metric_rows(values), key=lambda r: (-r["bytes"] if descending else r["bytes"], r["k"])
    )
    assert list(sorter.sorted()) == expected
