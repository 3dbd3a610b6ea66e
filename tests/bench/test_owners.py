"""bench/owners at a tiny scale: both layouts measured at one N on a cluster of its own, every
search found the owner's rows (the bench stops otherwise), the retention run dropped the oldest
day in each layout, every target is a verdict, and the plot is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.owners.__main__ import TARGETS, main
from tests.bench.conftest import own_ports


# About 6.5 s: its own cluster (2 s), a router per layout (1 s each) and the plot (1.5 s).
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
    # One N: no growth of relations to judge; every other target stated.
    assert set(payload["targets"]) == set(TARGETS) - {"relations_per_shard_growth"}
    for target in payload["targets"].values():
        assert {"value", "target", "met", "at_most"} <= set(target)
