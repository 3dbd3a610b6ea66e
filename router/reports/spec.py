"""A report request as a validated value: the search filters it reuses, what it groups by,
which metrics it computes, how the groups are ordered and cut. Pure; everything refused is a
400 naming the parameter."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from router.errors import BadRequest, excerpt
from router.search.query import AuditQuery, FlowQuery, Keys, covered_keys

Kind = Literal["audit", "flow"]
Format = Literal["json", "ndjson", "csv"]
MetricKind = Literal["count", "sum", "min", "max", "distinct"]

BUCKETS: dict[str, timedelta] = {
    "1m": timedelta(minutes=1),
    "5m": timedelta(minutes=5),
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "1d": timedelta(days=1),
}
KEY_COLUMN: dict[Kind, str] = {"audit": "owner", "flow": "switch"}
GROUP_KEYS: dict[Kind, tuple[str, ...]] = {
    "audit": ("bucket", "owner"),
    "flow": (
        "bucket",
        "switch",
        "src_ip",
        "dst_ip",
        "src_port",
        "dst_port",
        "proto",
        "ip_version",
    ),
}
IP_COLUMNS = ("src_ip", "dst_ip")
_PREFIXED = re.compile(r"^(src_ip|dst_ip)/([0-9]{1,3})$")


@dataclass(frozen=True)
class GroupKey:
    """One part of the group key: ``name`` as requested (``src_ip/24``), the column it reads
    and, for addresses, the prefix length (None: the whole address)."""

    name: str
    column: str
    prefix: int | None = None


@dataclass(frozen=True)
class Metric:
    name: str
    kind: MetricKind
    column: str | None  # None: count(*)


METRICS: dict[Kind, dict[str, Metric]] = {
    "audit": {
        "rows": Metric("rows", "count", None),
        "distinct(owner)": Metric("distinct(owner)", "distinct", "owner"),
    },
    "flow": {
        "rows": Metric("rows", "count", None),
        "flows": Metric("flows", "sum", "flow_count"),
        "bytes": Metric("bytes", "sum", "bytes"),
        "packets": Metric("packets", "sum", "packets"),
        "distinct(src_ip)": Metric("distinct(src_ip)", "distinct", "src_ip"),
        "distinct(dst_ip)": Metric("distinct(dst_ip)", "distinct", "dst_ip"),
        "min(first_seen)": Metric("min(first_seen)", "min", "first_seen"),
        "max(last_seen)": Metric("max(last_seen)", "max", "last_seen"),
    },
}


@dataclass(frozen=True)
class ReportSpec:
    kind: Kind
    # The owners (audit) or switches (flow) reported on: listed, by prefix, or every one the
    # token reaches (router/search/coverage.py decides which those are).
    keys: Keys
    filters: AuditQuery | FlowQuery  # the search filters (its keys: those of the report)
    group_by: tuple[GroupKey, ...]
    bucket: timedelta | None
    metrics: tuple[Metric, ...]
    order_by: Metric | None
    descending: bool
    limit: int | None
    format: Format

    @property
    def metric_index(self) -> int | None:
        return None if self.order_by is None else self.metrics.index(self.order_by)


def _items(values: list[str]) -> list[str]:
    """Repeated parameters and comma-separated lists alike, blanks dropped."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def parse_group_by(kind: Kind, values: list[str], ip_version: int | None) -> tuple[GroupKey, ...]:
    keys: list[GroupKey] = []
    for name in _items(values):
        prefixed = _PREFIXED.match(name)
        if prefixed and kind == "flow":
            column, length = prefixed.group(1), int(prefixed.group(2))
            most = 32 if ip_version == 4 else 128
            if not 0 <= length <= most:
                raise BadRequest(
                    f"the prefix length of {name} is out of range 0-{most}", "group_by"
                )
            key = GroupKey(name, column, length)
        elif name in GROUP_KEYS[kind]:
            key = GroupKey(name, name)
        else:
            known = ", ".join(GROUP_KEYS[kind])
            extra = " (src_ip and dst_ip also as src_ip/24)" if kind == "flow" else ""
            raise BadRequest(f"unknown group_by {excerpt(name)}; one of {known}{extra}", "group_by")
        if any(k.column == key.column for k in keys):
            raise BadRequest(f"{key.column} is grouped by twice", "group_by")
        keys.append(key)
    return tuple(keys)


def parse_metrics(kind: Kind, values: list[str]) -> tuple[Metric, ...]:
    names = _items(values) or ["rows"]
    metrics: list[Metric] = []
    for name in names:
        metric = METRICS[kind].get(name.replace(" ", ""))
        if metric is None:
            known = ", ".join(METRICS[kind])
            raise BadRequest(f"unknown metric {excerpt(name)}; one of {known}", "metrics")
        if metric not in metrics:
            metrics.append(metric)
    return tuple(metrics)


def parse_bucket(
    value: str | None, grouped: bool, span: timedelta, max_buckets: int
) -> timedelta | None:
    if value is None:
        if grouped:
            raise BadRequest(f"group_by bucket needs bucket, one of {', '.join(BUCKETS)}", "bucket")
        return None
    size = BUCKETS.get(value)
    if size is None:
        raise BadRequest(f"unknown bucket {excerpt(value)}; one of {', '.join(BUCKETS)}", "bucket")
    if not grouped:
        raise BadRequest("bucket is only meaningful with group_by bucket", "bucket")
    # Buckets are aligned to the epoch, so a window may touch one more than span / size.
    count = -(-span // size) + 1
    if count > max_buckets:
        raise BadRequest(
            f"{count} buckets of {value} in the window; at most {max_buckets} "
            "(SHARDLOG_REPORT__MAX_BUCKETS): choose a larger bucket or a shorter window",
            "bucket",
        )
    return size


def build_spec(
    kind: Kind,
    filters: AuditQuery | FlowQuery,
    group_by: list[str],
    metrics: list[str],
    bucket: str | None,
    order_by: str | None,
    order: Literal["asc", "desc"],
    limit: int | None,
    format: Format,
    max_buckets: int,
) -> ReportSpec:
    ip_version = filters.ip_version if isinstance(filters, FlowQuery) else None
    grouping = parse_group_by(kind, group_by, ip_version)
    chosen = parse_metrics(kind, metrics)
    ordered: Metric | None = None
    if order_by is not None:
        ordered = METRICS[kind].get(order_by.replace(" ", ""))
        if ordered is None:
            known = ", ".join(METRICS[kind])
            raise BadRequest(f"unknown metric {excerpt(order_by)}; one of {known}", "order_by")
        if ordered not in chosen:
            chosen = (*chosen, ordered)
    window = filters.window
    size = parse_bucket(
        bucket, any(k.column == "bucket" for k in grouping), window.end - window.start, max_buckets
    )
    return ReportSpec(
        kind=kind,
        keys=covered_keys(filters)[1],
        filters=filters,
        group_by=grouping,
        bucket=size,
        metrics=chosen,
        order_by=ordered,
        descending=order == "desc",
        limit=limit,
        format=format,
    )
