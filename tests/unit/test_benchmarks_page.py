"""docs/benchmarks.md quotes the committed bench/results/*.json and nothing else: its generated
blocks are what bench/docs_page.py makes of the JSON, every column of the spec finds figures,
and the founding reports' figures sit beside the benchmarks they are context for."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bench import docs_page, founding
from bench.docs_page import Column, Reference, Results, Table, Verdicts
from bench.docs_spec import BLOCKS
from bench.harness import RESULTS


def test_the_committed_page_is_what_the_generator_makes_of_the_committed_json() -> None:
    page = docs_page.PAGE.read_text()
    assert docs_page.render_page(page, BLOCKS, Results(RESULTS)) == page, (
        "docs/benchmarks.md differs from bench/results/*.json: run `make bench-docs`"
    )


def test_every_column_of_every_generated_table_finds_figures() -> None:
    results = Results(RESULTS)
    for name, parts in BLOCKS.items():
        for part in parts:
            if not isinstance(part, Table):
                continue
            result = results[part.file]
            rows = docs_page._rows(part, result)
            assert rows, f"{name}: no rows in {part.file}.json at {part.rows!r}"
            for column in part.columns:
                found = [docs_page._value(column, key, row, result) for key, row in rows]
                assert any(v is not None for v in found), (
                    f"{name}: column {column.header!r} ({column.path}) finds nothing in "
                    f"{part.file}.json"
                )


def test_a_changed_figure_fails_the_check(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(RESULTS, results, ignore=shutil.ignore_patterns("*.png", "*.html"))
    ingest = json.loads((results / "ingest.json").read_text())
    ingest["best"]["audit"]["rows_per_s"] += 1
    (results / "ingest.json").write_text(json.dumps(ingest))
    argv = ["--check", "--page", str(docs_page.PAGE), "--results", str(results)]
    assert docs_page.main(argv) == 1
    assert docs_page.main([*argv[:3], "--results", str(RESULTS)]) == 0


def test_stamps_directions_and_context_of_the_newer_result_shape(tmp_path: Path) -> None:
    result = {
        "benchmark": "demo",
        "when": "2026-11-28T03:00:00+00:00",
        "commit": {"sha": "abc1234", "dirty": True},
        "mode": {"quick": True, "rows": 2000},
        "parts": {"late": {"when": "2026-11-29T01:00:00+00:00", "commit": "def5678"}},
        "early": {"rows": [{"n": 1}]},
        "late": {"rows": [{"n": 2}]},
        "targets": {
            "kept": {"value": 0.8, "target": 0.9, "met": False, "at_most": False},
            "p99_ms": {
                "value": 12.5,
                "target": 100,
                "met": True,
                "at_most": True,
                "aa_spread_pct": 3.3,
            },
            "old": {"measured": 0, "target": 0, "met": True},
        },
        "context": {"fanout_vs_fdw": {"value": 0.0089, "compared_with": "the fdw path"}},
    }
    (tmp_path / "demo.json").write_text(json.dumps(result))
    results = Results(tmp_path)
    early = docs_page.render_block(
        (Table("demo", (Column("n", "n"),), rows="early.rows"),), results
    )
    assert "commit abc1234 (uncommitted changes), mode quick, rows 2,000" in early
    late = docs_page.render_block((Table("demo", (Column("n", "n"),), rows="late.rows"),), results)
    assert "run 2026-11-29T01:00:00+00:00, commit def5678, mode quick" in late
    judged = docs_page.render_block((Verdicts("demo"),), results)
    assert "| `targets.kept` | 0.8 | ≥ 0.9 | **missed** |" in judged
    spread = "| `targets.p99_ms` | 12.5 | ≤ 100 | met | abc1234 (uncommitted changes) |"
    assert f"{spread} aa_spread_pct 3.3 |" in judged
    assert "0 (direction not stated)" in judged
    assert "Context (shown, not judged)" in judged
    assert "| `context.fanout_vs_fdw` | 0.0089 | compared_with the fdw path |" in judged


def test_a_result_without_stamps_says_so(tmp_path: Path) -> None:
    (tmp_path / "bare.json").write_text(json.dumps({"figures": {"a": 1}}))
    text = docs_page.render_block(
        (Table("bare", (Column("figure", "@key"), Column("value", "")), rows="figures"),),
        Results(tmp_path),
    )
    assert "run time unknown, commit unknown, mode unknown" in text
    assert "| a | 1 |" in text


def test_the_founding_reports_figures_are_whole_and_placed() -> None:
    reference = founding.load()
    placed = {
        part.file for parts in BLOCKS.values() for part in parts if isinstance(part, Reference)
    }
    for name, table in reference["tables"].items():
        assert table["source"] in reference["sources"], name
        assert set(table["beside"]) <= placed, f"{name} sits beside a benchmark the page lacks"
        assert any(f["table"] == name for f in reference["figures"]), name
    for figure in reference["figures"]:
        assert figure["table"] in reference["tables"]
        assert figure["source"] in reference["sources"]
        assert isinstance(figure["value"], int | float) and figure["unit"]
        assert figure["system"]
    for source in reference["sources"].values():
        assert source["url"].startswith("https://") and source["machine"]


@pytest.mark.parametrize("benchmark", ["crud", "ycsb"])
def test_ours_stands_beside_theirs_where_we_measure_the_same(benchmark: str) -> None:
    result = Results(RESULTS)[benchmark]
    tables = founding.tables_beside(benchmark, founding.load())
    paired = [founding.ours(benchmark, f, result) for t in tables for f in t.figures]
    assert any(paired)
    header, rows = founding.side_by_side(benchmark, tables[0], result, "ours")
    assert "theirs" in header and "ours" in header
    assert all(len(row) == len(header) for row in rows)
