"""bench/ingest/small at a tiny scale: every router configuration runs both loads (and the
router of a baseline commit, here HEAD in a temporary worktree), every request is answered 200
(the bench stops otherwise), the summary, the verdicts, the baseline's commit and the plot are
written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import baseline
from bench.ingest import small
from tests.bench.conftest import own_ports


@pytest.mark.slow
def test_a_tiny_small_requests_bench_runs_every_configuration(
    results: Path, tmp_path: Path
) -> None:
    flags = ["--requests", "40", "--flow-requests", "6", "--clients", "2", "--repeats", "1"]
    flags += ["--warm-up-rounds", "0"]
    flags += ["--shards", "2", "--data-dir", str(tmp_path / "s")]
    flags += ["--baseline-commit", "HEAD"]
    assert small.main([*flags, *own_ports(2)]) == 0

    payload = json.loads((results / "ingest-small.json").read_text())
    assert (results / "ingest-small.png").stat().st_size > 0
    head = baseline.git("rev-parse", "HEAD")
    assert payload["baseline"]["commit"] == head
    assert payload["baseline"]["subject"] == baseline.git("show", "-s", "--format=%s", head)
    assert set(payload["results"]) == {*small.CONFIGS, f"commit {head[:7]}"}
    for by_load in payload["results"].values():
        assert set(by_load) == {"audit-1-record", "flows-100-rows"}
        for summary in by_load.values():
            assert summary["requests_per_s"] > 0 and summary["p95_ms"] >= summary["p50_ms"] > 0
            assert summary["router_cpu_us_per_request"] > 0
            assert summary["postgres_cpu_us_per_request"] > 0
    assert set(payload["verdicts"]) == {"audit_1_record_vs_before", "flows_100_rows_p50_ms"}
    assert "shardlog-baseline-" not in json.dumps(payload)  # no path of the temporary tree
    assert all(isinstance(v["met"], bool) for v in payload["verdicts"].values())
