"""bench/search/mixed at a tiny scale: every phase ran with searches answering, both targets
are stated with their figures, and the plot is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.search.mixed import main
from tests.bench.conftest import own_ports


@pytest.mark.slow
def test_a_tiny_mixed_run_states_both_targets(results: Path, tmp_path: Path) -> None:
    flags = ["--seconds", "1", "--repeats", "1", "--clients", "2", "--preload", "3000"]
    flags += ["--shards", "2", "--data-dir", str(tmp_path / "cluster"), *own_ports(2)]
    assert main(flags) == 0

    payload = json.loads((results / "search_mixed.json").read_text())
    assert (results / "search_mixed.png").stat().st_size > 0
    (round_,) = payload["rounds"]
    assert round_["paced_solo"]["search_latency"] is None
    assert round_["paced_mixed"]["search_latency"]["requests"] > 0
    assert round_["small_mixed"]["search_latency"]["requests"] > 0
    assert round_["small_solo"]["write_latency"]["p50_ms"] > 0
    assert set(payload["targets"]) == {
        "paced_writes_kept_beside_2_pagers",
        "small_write_p50_beside_1_pager_vs_solo",
    }
    for target in payload["targets"].values():
        assert set(target) == {"value", "target", "met", "at_most"}
