"""bench/overview: the one page of every benchmark's results, rendered from JSON alone."""

from __future__ import annotations

import json
from pathlib import Path

from bench import overview
from bench.harness import RESULTS, verdict


def _result(tmp_path: Path, name: str, payload: dict[str, object]) -> None:
    base = {"benchmark": name, "when": "2026-11-25T00:00:00+00:00", "machine": {"cpus": 2}}
    (tmp_path / f"{name}.json").write_text(json.dumps(base | payload))


def test_targets_anywhere_in_a_result_are_verdicts() -> None:
    result = {
        "targets": {"p50_s": verdict(0.25, 0.2)},
        "ratios": {"audit_vs_copy": verdict(0.37, 0.5, at_most=False)},
        "target": verdict(0.41, 0.5, at_most=False),
        "failover": {"lost": verdict(0, 0)},
    }
    found = {v.name: (v.value, v.target, v.at_most, v.met) for v in overview.verdicts(result)}
    assert found == {
        "targets.p50_s": (0.25, 0.2, True, False),
        "ratios.audit_vs_copy": (0.37, 0.5, False, False),
        "target": (0.41, 0.5, False, False),
        "failover.lost": (0, 0, True, True),
    }


def test_page_shows_targets_plot_reference_tables_and_escapes(tmp_path: Path) -> None:
    _result(
        tmp_path,
        "crud",
        {
            "targets": {"rate": verdict(900.0, 1000.0, at_most=False)},
            "cells": [{"op": "insert", "batch": 100, "rows_per_s": 1234.5}],
            "reference": "bench/crud/reference.json",
            "note": "<script>alert(1)</script>",
        },
    )
    (tmp_path / "crud.png").write_bytes(b"\x89PNG")
    (tmp_path / "crud").mkdir()
    (tmp_path / "crud" / "workloada.txt").write_text("[OVERALL], RunTime(ms), 1\n")
    _result(tmp_path, "plain", {"rows": 10})
    (tmp_path / "broken.json").write_text("{not json")

    assert overview.main(["--results", str(tmp_path)]) == 0
    page = (tmp_path / "index.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "0/1 met" in page and "MISSED" in page
    assert '<img src="crud.png"' in page and "plain.png" not in page
    # The founding reports' tables that sit beside crud, from bench/crud/reference.json.
    assert "The founding reports beside ours (context, not targets)" in page
    assert "https://github.com/AmshuRao/HPE_CTY_PROJECT" in page and "<th>theirs</th>" in page
    assert "<th>rows_per_s</th>" in page and "1,234" in page
    assert 'href="crud/workloada.txt"' in page
    assert 'id="plain"' in page and "broken" not in page
    assert "http://" not in page


def test_committed_results_render_with_every_benchmark() -> None:
    page = overview.render(RESULTS)
    for path in RESULTS.glob("*.json"):
        assert f'id="{path.stem}"' in page
    assert "No targets stated" not in page, "every committed result states its targets"


def test_committed_page_is_rendered_from_the_committed_results() -> None:
    assert (RESULTS / "index.html").read_text() == overview.render(RESULTS), (
        "bench/results/index.html is stale: run `make bench-report`"
    )
