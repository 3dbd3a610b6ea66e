"""bench/search/compacted at a tiny scale: the day is compacted, every estimate's bounds held
the exact count (the run fails otherwise), the rare pattern's estimate on the segments is
exact, the targets are stated and the plot is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.search.compacted import TARGETS, main
from tests.bench.conftest import own_ports


@pytest.mark.slow
def test_a_tiny_compacted_run_states_its_targets(results: Path, tmp_path: Path) -> None:
    flags = ["--rows", "20000", "--repeats", "1", "--shards", "2"]
    flags += ["--data-dir", str(tmp_path / "cluster"), *own_ports(2)]
    assert main(flags) == 0

    payload = json.loads((results / "search_compacted.json").read_text())
    assert (results / "search_compacted.png").stat().st_size > 0
    rows = {(r["layout"], r["set"], r["window"]): r for r in payload["results"]}
    rare = rows[("compacted", "rare 6-digit pattern", "day")]
    assert rare["method"] == "segments" and rare["exact"] == rare["estimate"] == 6
    assert rare["bounds"] == [6, 6]
    common = rows[("compacted", "common word", "day")]
    assert common["bounds"][0] <= common["exact"] <= common["bounds"][1]
    assert set(payload["targets"]) == set(TARGETS)
