"""bench/console at a tiny scale: the weight of every console file (gzip and as sent), both
searches timed in headless chromium with their pages shown, the verdicts and the plot
written. Not a judge of speed: the budgets are stated, met or not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.console import __main__ as console
from bench.console.assets import files
from tests.bench.conftest import own_ports


@pytest.mark.slow
def test_a_tiny_console_bench_writes_its_figures(results: Path, tmp_path: Path) -> None:
    flags = ["--rows", "3000", "--repeats", "1", "--shards", "2"]
    assert console.main([*flags, "--data-dir", str(tmp_path / "c"), *own_ports(2)]) == 0

    payload = json.loads((results / "console.json").read_text())
    assert (results / "console.png").stat().st_size > 0
    assets = payload["assets"]
    assert set(assets["files"]) == set(files())
    for sizes in assets["files"].values():
        assert sizes["sent_bytes"] > 0 and sizes["gzip_bytes"] > 0
    assert assets["gzip_bytes"] == sum(s["gzip_bytes"] for s in assets["files"].values())
    assert set(payload["first_page"]) == set(console.CASES)
    for page in payload["first_page"].values():
        assert page["rows_shown"] == 50
        assert page["median_ms"] > 0 and page["api_median_ms"] > 0
        assert len(page["runs_ms"]) == 1
    assert set(payload["verdicts"]) == {
        "assets_gzip_bytes",
        "assets_sent_bytes",
        *(f"first_page_ms: {name}" for name in console.CASES),
    }
    assert all(isinstance(v["met"], bool) for v in payload["verdicts"].values())
