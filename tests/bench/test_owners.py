"""bench/owners at a tiny scale: both layouts measured at one N on a cluster of its own, every
search found the owner's rows (the bench stops otherwise), the retention run dropped the oldest
day in each layout, every target is a verdict, and the plot is written."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from bench.owners import big
from bench.owners.__main__ import TARGETS, alone, main, targets
from tests.bench.conftest import own_ports
from tests.support import free_port_range


# About 7.5 s: its own cluster (2 s), a router per layout (1 s each), a compaction (1 s) and the
# plot (1.5 s).
@pytest.mark.slow
def test_a_tiny_owners_run_measures_both_layouts(results: Path, tmp_path: Path) -> None:
    flags = ["--owners", "4", "--alone", "0", "--first-writes", "3", "--searches", "3"]
    flags += ["--per-request", "2", "--shards", "1", "--groups", "1"]
    assert main([*flags, "--data-dir", str(tmp_path / "cluster"), *own_ports(1)]) == 0

    payload = json.loads((results / "owners.json").read_text())
    assert (results / "owners.png").stat().st_size > 0
    runs = {run["layout"]: run for run in payload["runs"]}
    assert set(runs) == {"shared", "per-owner"}
    for run in runs.values():
        assert run["owner_days"] == 12 and run["rows"] == 36
        assert run["disk"]["payload_bytes_per_owner_day"] > 0
        assert run["first_write"]["count"] == 3 and run["search_1h"]["count"] == 3
        assert run["retention"]["run"]["status"] == "done"
        pages = run["many_owner_pages"]
        assert set(pages) == {"all", "prefix_10pct", "prefix_1pct"}
        assert pages["all"]["owners"] == 4 and pages["prefix_1pct"]["owners"] == 1
        assert all(found["pages"]["count"] >= 1 for found in pages.values())
    shared_parts = runs["shared"]["disk"]["by_part_per_owner_day"]
    own_parts = runs["per-owner"]["disk"]["by_part_per_owner_day"]
    assert shared_parts["shared tables"] > 0 and shared_parts["day tables"] == 0
    assert own_parts["day tables"] > 0 and own_parts["shared tables"] == 0
    # The oldest day of 4 owners (and no first writer's) went: one shared day on the one shard,
    # or the 4 owners' own tables of that day.
    assert runs["shared"]["retention"]["run"]["shared_days_dropped"] == 1
    assert runs["shared"]["retention"]["run"]["tables_dropped"] == 0
    assert runs["per-owner"]["retention"]["run"]["tables_dropped"] == 4
    assert (
        runs["per-owner"]["relations_per_shard"]["after"]
        > runs["per-owner"]["relations_per_shard"]["before"]
    )
    # The older kept day compacted in the shared layout: the 4 owners' 2 passes of 3 rows.
    closed = runs["shared"]["compacted_day"]
    assert (closed["owner_days"], closed["rows"], closed["shard_days"]) == (4, 24, 1), closed
    assert closed["owner_days_rows"] == 4  # one shard: one owner_days row an owner
    assert closed["compacted_bytes_per_owner_day"] > 0 and "compacted_day" not in runs["per-owner"]
    assert "closed_day_bytes_per_owner_day" in payload["context"]
    # One N: no growth of relations to judge; every other target stated.
    assert set(payload["targets"]) == set(TARGETS) - {"relations_per_shard_growth"}
    for target in payload["targets"].values():
        assert {"value", "target", "met", "at_most"} <= set(target)


def test_a_million_that_does_not_fit_is_an_extrapolation_and_a_shortfall() -> None:
    """At 100 owners/s both passes of 1M owners take 20,000 s: over an hour, so nothing runs
    and the verdict is the extrapolation, marked as such."""
    measured: dict[str, Any] = {
        "layout": "shared",
        "owners": 50_000,
        "first_pass_s": 500.0,
        "second_pass_s": 500.0,
        "first_pass_owners_per_s": 100.0,
        "disk": {"overhead_bytes_per_owner_day": 700.0},
        "catalog": {"bytes_per_owner": 400.0},
        "first_write": {"p50_ms": 3.0},
        "search_1h": {"p50_ms": 3.0, "p95_ms": 9.0},
        "retention": {"run": {"seconds": 0.2}},
        "router_rss_mb": {"first_pass": 120.0, "second_pass": 121.0},
        "relations_per_shard": {"after": 522},
    }
    args = argparse.Namespace(alone=1_000_000, alone_budget_s=3600.0)
    million, runs = alone(args, [measured])
    assert runs == []
    assert million["measured"] is False and "not a measurement" in million["note"]
    assert million["both_passes_s_extrapolated"] == 20_000.0
    judged = targets([measured], million)
    assert judged["alone_within_budget_s"]["met"] is False
    assert judged["alone_within_budget_s"]["extrapolated"] is True
    assert judged["overhead_bytes_per_owner_day"]["met"] is True
    assert "relations_per_shard_growth" not in judged  # one N: nothing to compare


# About 7 s: its own cluster, two routers, a warm-up round and 2 repeats of 4 small requests and
# 3 searches each, 2 medium rounds.
@pytest.mark.slow
def test_a_tiny_big_owners_run_compares_both_layouts(results: Path, tmp_path: Path) -> None:
    flags = ["--owners", "2", "--rows-per-owner-day", "100", "--rows-per-request", "50"]
    flags += ["--medium-rows", "50", "--searches", "3", "--repeats", "2", "--shards", "1"]
    flags += ["--groups", "1"]
    ports = [*own_ports(1), "--second-router-port", str(free_port_range(1))]
    assert big.main([*flags, "--data-dir", str(tmp_path / "cluster"), *ports]) == 0

    payload = json.loads((results / "owners-big.json").read_text())
    assert (results / "owners-big.png").stat().st_size > 0
    assert set(payload["layouts"]) == {"shared", "per-owner"}
    for found in payload["layouts"].values():
        assert found["rows_written"] == 3 * 2 * 100  # a warm-up round and 2 repeats
        assert found["medium_rows_written"] == 2 * 2 * 50
        assert len(found["ingest_rows_per_s"]) == 2 and found["search_all"]["count"] == 6
    # 100 rows an owner-day at the default threshold: all shared, or none.
    assert payload["layouts"]["shared"]["rows_shared"] == 600
    assert payload["layouts"]["per-owner"]["rows_shared"] == 0
    assert set(payload["context"]) == {"spreads", "shared_fraction", "medium_ingest_ratio"}
    assert set(payload["targets"]) == set(big.TARGETS)
    for target in payload["targets"].values():
        assert {"value", "target", "met", "at_most"} <= set(target)
