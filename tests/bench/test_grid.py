"""bench/grid at a tiny scale: every cell, the time-index comparison and the mixed run are in
the JSON with the layout the report reads, and the plot is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.grid.__main__ import main
from tests.bench.conftest import own_ports

CELL_KEYS = {"clients", "rows_per_request", "tps", "rows_per_s", "avg_ms", "p90_ms", "max_ms"}


@pytest.mark.slow
def test_a_tiny_grid_writes_every_cell(results: Path, tmp_path: Path) -> None:
    flags = ["--clients", "1,2", "--rows", "1,10", "--runs", "2", "--seconds", "0.5"]
    flags += ["--mixed-seconds", "1", "--index-rows", "20000", "--shards", "2", "--owners", "2"]
    assert main([*flags, "--data-dir", str(tmp_path / "cluster"), *own_ports(2)]) == 0

    payload = json.loads((results / "grid.json").read_text())
    assert (results / "grid.png").stat().st_size > 0
    grid = payload["cells"]
    assert [(c["clients"], c["rows_per_request"]) for c in grid] == [
        (1, 1),
        (2, 1),
        (1, 10),
        (2, 10),
    ]
    for cell in grid:
        assert set(cell) >= CELL_KEYS
        assert len(cell["tps_runs"]) == 2
        assert cell["requests"] > 0 and cell["rows_per_s"] > 0
        assert cell["avg_ms"] <= cell["max_ms"]
    assert set(payload["time_index"]) == {"btree", "brin"}
    assert (
        payload["time_index"]["brin"]["index_bytes"] < payload["time_index"]["btree"]["index_bytes"]
    )
    assert payload["mixed"]["search_latency"]["requests"] > 0
    for target in payload["targets"].values():
        assert set(target) == {"value", "target", "met", "at_most"}
