"""bench/collector at a tiny scale: both targets searched, every step with its drops and CPU,
the summary and the verdict in the JSON the report reads, and the plot written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.collector.__main__ import main
from tests.bench.conftest import own_ports
from tests.support import free_port_range

STEP_KEYS = {
    "rate",
    "sent",
    "stored",
    "dropped",
    "kernel_dropped_datagrams",
    "cpu_us_per_flow",
    "ok",
}


@pytest.mark.slow
def test_a_tiny_collector_bench_searches_both_targets(results: Path, tmp_path: Path) -> None:
    flags = ["--repeats", "1", "--seconds", "0.5", "--start-rate", "2000", "--max-rate", "4000"]
    flags += ["--bisections", "0", "--shards", "2", "--pool-flows", "3000", "--drain", "10"]
    flags += ["--collector-port", str(free_port_range(4)), "--data-dir", str(tmp_path / "c")]
    assert main([*flags, *own_ports(2)]) == 0

    payload = json.loads((results / "collector.json").read_text())
    assert (results / "collector.png").stat().st_size > 0
    for name in ("shardlog", "nfcapd"):
        (search,) = payload["searches"][name]
        assert [step["rate"] for step in search["steps"]] == [2000, 4000]
        for step in search["steps"]:
            assert set(step) >= STEP_KEYS
            assert step["sent"] >= step["rate"] / 2
        # A few thousand flows a second drop nothing, in the database or in nfcapd's file.
        assert search["best_flows_per_s"] == 4000, search
        assert payload["summary"][name]["cpu_us_per_flow"] > 0
    assert payload["summary"]["ratio"] == 1.0
    bound = payload["summary"]["database_ceiling"]
    assert bound["rows_stored"] == 3000 and bound["flow_count_stored"] == 3000 * 4, bound
    assert len(bound["merge_flows_per_s_runs"]) == 3 and bound["merge_flows_per_s"] > 0
    assert bound["target_within_ceiling"] == (bound["merge_flows_per_s"] >= 0.5 * 4000)
    assert set(payload["targets"]["shardlog_over_nfcapd"]) == {"value", "target", "met", "at_most"}
