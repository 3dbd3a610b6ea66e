"""The partial-aggregate statement of a report: per shard, one statement over the shard's day
tables in range (a UNION ALL of the matching rows of each, tagged with its owner or switch),
grouped by the report's key and ORDERED BY it, so the router merges the shards as streams.
The fdw path runs the same statement over the owners' parent tables on the coordinator.
Filters come from the search's SQL; values travel as parameters."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from router.reports import hll
from router.reports.spec import GroupKey, Metric, ReportSpec
from router.search.sql import Params, where

# Buckets are aligned to this origin (UTC midnight), the same on every shard.
BUCKET_ORIGIN = "TIMESTAMPTZ '2000-01-01 00:00:00+00'"
# The owner or switch of a row, as the UNION ALL tags it.
TAG = "report_key"
# A FROM item and the key its rows are tagged with (None: its rows carry TAG).
Source = tuple[str | None, str]


def _time_column(spec: ReportSpec) -> str:
    return "ts" if spec.kind == "audit" else "first_seen"


def _column(spec: ReportSpec, name: str) -> str:
    return TAG if name in ("owner", "switch") else name


def _key_sql(spec: ReportSpec, key: GroupKey, params: Params) -> str:
    if key.column == "bucket":
        return (
            f"date_bin({params.add(spec.bucket)}::interval, {_time_column(spec)}, {BUCKET_ORIGIN})"
        )
    if key.column in ("owner", "switch"):
        return f'{TAG} COLLATE "C"'
    if key.column in ("src_ip", "dst_ip"):
        if key.prefix is None:
            return key.column  # stored addresses are host addresses: /32 or /128
        # The network of every address, so keys of one family share a mask length and
        # PostgreSQL's inet order is the address order.
        v4 = min(key.prefix, 32)
        return (
            f"network(set_masklen({key.column}, "
            f"CASE WHEN family({key.column}) = 4 THEN {v4} ELSE {key.prefix} END))"
        )
    if key.column == "proto":
        return "COALESCE(proto, -1)"  # a flow without a protocol sorts first, as -1
    return key.column


def _key_output(key: GroupKey, position: int) -> str:
    """A grouped key as the router reads it. An address travels in inet's binary form
    (inet_send): as bytes it compares as PostgreSQL orders inet values of one mask length per
    family, so the router's merge and the shards agree on the order."""
    column = f"k{position}"
    return f"inet_send({column})" if key.column in ("src_ip", "dst_ip") else column


def _metric_sql(metric: Metric) -> str:
    if metric.kind == "count":
        return "count(*)"
    column = _column_of(metric)
    if metric.kind == "sum":
        return f"COALESCE(sum({column}), 0)"  # 0, not NULL, over no rows
    if metric.kind == "distinct":
        return f"hll_add_agg(hll_hash_text({column}::text), {hll.SQL_PARAMETERS})::text"
    return f"{metric.kind}({column})"


def _column_of(metric: Metric) -> str:
    assert metric.column is not None
    return TAG if metric.column in ("owner", "switch") else metric.column


def _needed(spec: ReportSpec) -> list[str]:
    """The columns of a day table the grouping and the metrics read, the owner or switch tag
    first when anything reads it."""
    names = [k.column for k in spec.group_by] + [m.column or "" for m in spec.metrics]
    columns: list[str] = [TAG] if any(n in ("owner", "switch") for n in names) else []
    for name in names:
        if name == "bucket":
            name = _time_column(spec)
        if name and name not in ("owner", "switch") and name not in columns:
            columns.append(name)
    return columns


def _aggregate(spec: ReportSpec, sources: Sequence[Source], params: Params) -> str:
    """``sources``: (owner or switch key, quoted table) pairs; a key None: the source's rows
    carry their key as ``TAG`` (a shard-day's, named by the shard's mirror). Grouped reports
    come ordered by their key."""
    condition = where(spec.filters, params)
    needed = _needed(spec)
    branches = []
    for key, table in sources:
        read = [
            f"{params.add(key)}::text AS {TAG}" if c == TAG and key is not None else c
            for c in needed
        ]
        branches.append(f"SELECT {', '.join(read) or '1'} FROM {table} WHERE {condition}")
    rows = " UNION ALL ".join(branches)
    metrics = [_metric_sql(m) for m in spec.metrics]
    if not spec.group_by:
        return f"SELECT {', '.join(metrics)} FROM ({rows}) AS rows"
    keys = [f"{_key_sql(spec, k, params)} AS k{n}" for n, k in enumerate(spec.group_by)]
    named = [f"{m} AS m{n}" for n, m in enumerate(metrics)]
    positions = ", ".join(str(n + 1) for n in range(len(keys)))
    outputs = [_key_output(k, n) for n, k in enumerate(spec.group_by)]
    outputs += [f"m{n}" for n in range(len(metrics))]
    order = ", ".join(f"k{n}" for n in range(len(keys)))
    return (
        f"SELECT {', '.join(outputs)} FROM (SELECT {', '.join(keys + named)} "
        f"FROM ({rows}) AS rows GROUP BY {positions}) AS groups ORDER BY {order}"
    )


def partial_sql(
    spec: ReportSpec, sources: Sequence[Source], params: Params | None = None
) -> tuple[str, list[Any]]:
    """One shard's statement over its day tables of the report's owners in range, or the
    coordinator's over the owners' parent tables (``sources`` are then those). ``params``:
    those the sources already hold."""
    params = params or Params()
    return _aggregate(spec, sources, params), params.values
