"""The pure part of reports: parsing and validation, the per-shard SQL, the merge of sorted
partials (property-tested: any split of the rows across shards gives the same groups), top-N
and the external sort."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router.db import inet
from router.errors import BadRequest
from router.reports.merge import Layout, finish, merge_complete
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
    return build_spec("flow", flows(days, ip_version), max_buckets=1000, **{**defaults, **choice})


def test_defaults_and_lists() -> None:
    made = spec(group_by=["src_ip/24,dst_port"], metrics=["bytes", "rows"], order_by="packets")
    assert [k.name for k in made.group_by] == ["src_ip/24", "dst_port"]
    assert made.group_by[0].prefix == 24
    assert [m.name for m in made.metrics] == ["bytes", "rows", "packets"]
    assert spec().metrics == (METRICS["flow"]["rows"],)
    assert spec().keys == Keys.of(["sw"])  # the search filters' keys: one source of truth


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
    assert text.endswith("GROUP BY 1, 2) AS groups ORDER BY k0, k1")
    assert text.startswith("SELECT k0, inet_send(k1), m0, m1 ")  # addresses as bytes
    assert 'report_key COLLATE "C"' in text and "hll_add_agg" in text
    assert "sw" in params and "sw2" in params
    total, _ = partial_sql(spec(), [("sw", '"t"')])
    assert "GROUP BY" not in total
    assert "report_key" not in total  # nothing reads the switch: no tag per row


# --- the merge ---------------------------------------------------------------------------


def rows_strategy() -> Any:
    return st.lists(
        st.tuples(st.integers(0, 6), st.integers(0, 3), st.integers(0, 10**12)), max_size=60
    )


Partial = tuple[tuple[int, int], int, int, int, int]


async def _batches(items: list[Any], size: int) -> AsyncIterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def partials(rows: list[tuple[int, int, int]]) -> list[Partial]:
    """What a shard returns for its rows: groups by key (two key columns), sorted, with count,
    sum, min and max."""
    groups: dict[tuple[int, int], list[int]] = {}
    for a, b, value in rows:
        group = groups.setdefault((a, b), [0, 0, value, value])
        group[0] += 1
        group[1] += value
        group[2] = min(group[2], value)
        group[3] = max(group[3], value)
    return [(*key, *groups[key]) for key in sorted(groups)]  # type: ignore[misc]


NAMES = ["rows", "bytes", "min(first_seen)", "max(last_seen)"]
TWO_KEYS = spec(group_by=["src_port,dst_port"], metrics=NAMES)


async def merged(shards: list[list[Partial]], batch: int) -> list[Partial]:
    out = []
    streams = [_batches(p, batch) for p in shards]
    async for groups in merge_complete(streams, Layout.of(TWO_KEYS)):
        out += [(*key, *values) for key, values in groups]
    return out


@settings(max_examples=300, deadline=None)
@given(
    rows=rows_strategy(),
    shards=st.integers(1, 12),
    batch=st.integers(1, 7),
    seed=st.integers(),
)
def test_any_split_across_shards_merges_to_the_single_shard_answer(
    rows: list[tuple[int, int, int]], shards: int, batch: int, seed: int
) -> None:
    rng = random.Random(seed)
    split: list[list[tuple[int, int, int]]] = [[] for _ in range(shards)]
    for row in rows:
        split[rng.randrange(shards)].append(row)
    answer = asyncio.run(merged([partials(part) for part in split], batch))
    assert answer == partials(rows)
    assert sum(group[2] for group in answer) == len(rows)


def test_a_report_without_group_by_combines_one_row_per_shard() -> None:
    total = spec(metrics=["rows", "bytes", "min(first_seen)"])
    first = datetime(2025, 1, 1, tzinfo=UTC)
    shards = [[(3, 30, first)], [(0, 0, None)], [(2, 5, first - timedelta(hours=1))]]

    async def run() -> list[Any]:
        streams = [_batches(p, 1) for p in shards]
        return [g async for b in merge_complete(streams, Layout.of(total)) for g in b]

    assert asyncio.run(run()) == [((), (5, 35, first - timedelta(hours=1)))]


def test_addresses_merge_in_the_order_postgresql_sends_them() -> None:
    """Keys arrive as inet's binary form: bytes order is PostgreSQL's inet order (10.0.0.2
    before 10.0.0.10, every IPv4 address before every IPv6 one)."""
    by_src = spec(group_by=["src_ip"], metrics=["rows"])
    texts = ["10.0.0.2", "10.0.0.10", "9.255.255.255", "::1", "2001:db8::1"]
    encoded = sorted(inet.encode_address(t) for t in texts)
    assert [inet.decode(e) for e in encoded] == [
        "9.255.255.255",
        "10.0.0.2",
        "10.0.0.10",
        "::1",
        "2001:db8::1",
    ]
    shards = [[(e, 1) for e in encoded], [(e, 2) for e in encoded[1:]]]

    async def run() -> list[dict[str, Any]]:
        streams = [_batches(p, 2) for p in shards]
        batches = merge_complete(streams, Layout.of(by_src))
        return [finish(by_src, g) async for b in batches for g in b]

    assert asyncio.run(run()) == [
        {"src_ip": "9.255.255.255", "rows": 1},
        *({"src_ip": inet.decode(e), "rows": 3} for e in encoded[1:]),
    ]


async def _top(values: list[int], limit: int, descending: bool) -> list[Any]:
    groups = [(n, (v,)) for n, v in enumerate(values)]
    metric = METRICS["flow"]["bytes"]
    return await top(_batches(groups, 7), 0, metric, descending, limit)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.integers(0, 50), max_size=80),
    limit=st.integers(1, 30),
    descending=st.booleans(),
)
def test_top_n_equals_a_full_sort(values: list[int], limit: int, descending: bool) -> None:
    groups = [(n, (v,)) for n, v in enumerate(values)]
    expected = sorted(groups, key=lambda g: (-g[1][0] if descending else g[1][0], g[0]))
    assert asyncio.run(_top(values, limit, descending)) == expected[:limit]


def metric_rows(values: list[int]) -> list[dict[str, Any]]:
    return [{"k": n, "bytes": v} for n, v in enumerate(values)]


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
