"""Every committed benchmark result: its stamp (time, commit, machine, mode; per part where it
holds parts), every verdict recomputed by harness.verdict from its value, target and direction,
context figures that are not judged, and no directory of any machine in it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from bench import overview, stamps
from bench.harness import RESULTS, context, verdict

COMMITTED = sorted(RESULTS.glob("*.json"))
MACHINE_PATHS = ("/work/", "/tmp/", "/root/", "/home/")
UNKNOWN = stamps.UNKNOWN


def stated_verdicts(value: Any, path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every mapping with a ``target`` and a boolean ``met``, wherever it sits."""
    if isinstance(value, Mapping):
        if "target" in value and isinstance(value.get("met"), bool):
            yield path, value
            return
        for key, item in value.items():
            if key not in ("parts", "context", "reference"):
                yield from stated_verdicts(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from stated_verdicts(item, f"{path}[{index}]")


def assert_stamp(stamp: Mapping[str, Any], where: str) -> None:
    """A run's stamp, or "unknown" where a figure was measured before results were stamped."""
    when, commit, dirty, mode = (stamp.get(k) for k in ("when", "commit", "dirty", "mode"))
    assert when == UNKNOWN or datetime.fromisoformat(str(when)).tzinfo is not None, where
    assert commit == UNKNOWN or re.fullmatch(r"[0-9a-f]{40}", str(commit)), (where, commit)
    assert dirty == UNKNOWN or isinstance(dirty, bool), (where, dirty)
    assert mode == UNKNOWN or (
        isinstance(mode, Mapping) and {"quick", "full", "arguments"} <= set(mode)
    ), (where, mode)


@pytest.fixture(params=COMMITTED, ids=lambda p: p.name)
def result(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    path: Path = request.param
    loaded: dict[str, Any] = json.loads(path.read_text())
    return path.name, loaded


def test_every_result_carries_its_stamp(result: tuple[str, dict[str, Any]]) -> None:
    name, found = result
    assert found["benchmark"] == name.removesuffix(".json")
    assert isinstance(found["machine"], Mapping) and found["machine"].get("cpus"), name
    assert_stamp(found, name)
    parts = found.get("parts")
    if parts is not None:
        assert parts and isinstance(found["several_runs"], bool), name
        for part, stamp in parts.items():
            assert_stamp(stamp, f"{name} part {part}")


def test_every_stored_verdict_is_what_harness_verdict_gives(
    result: tuple[str, dict[str, Any]],
) -> None:
    name, found = result
    for path, stated in stated_verdicts(found):
        assert isinstance(stated.get("at_most"), bool), f"{name}{path}: no direction"
        assert "value" in stated, f"{name}{path}: no value"
        again = verdict(stated["value"], stated["target"], at_most=stated["at_most"])
        assert stated["met"] == again["met"], f"{name}{path}: stored met disagrees"
        assert {k: stated[k] for k in again} == again, f"{name}{path}"


def test_context_figures_are_not_judged(result: tuple[str, dict[str, Any]]) -> None:
    name, found = result
    for figure, item in found.get("context", {}).items():
        assert set(item) == {"value", "compared_with"}, f"{name} context {figure}"
        assert item["compared_with"].strip(), f"{name} context {figure}: compared with what?"


def test_no_directory_of_any_machine(result: tuple[str, dict[str, Any]]) -> None:
    name, found = result
    text = json.dumps(found)
    assert not [p for p in MACHINE_PATHS if p in text], name


def test_comparisons_with_a_path_slow_by_design_are_context_not_targets() -> None:
    search = json.loads((RESULTS / "search.json").read_text())
    report = json.loads((RESULTS / "report.json").read_text())
    assert "fanout_vs_fdw" not in search["targets"] and "fanout_vs_fdw" in search["context"]
    assert "fdw_vs_shardlog" not in report["targets"] and "fdw_vs_shardlog" in report["context"]


def test_a_baselines_figures_are_no_targets_of_this_code() -> None:
    cpu = json.loads((RESULTS / "ingest-cpu.json").read_text())
    for kind, routers in cpu["kinds"].items():
        assert "target" in routers["this"], kind
        assert "target" not in routers.get("baseline", {}), kind
        assert re.fullmatch(r"[0-9a-f]{40}", routers.get("baseline", {}).get("commit", "0" * 40))


def test_the_checks_catch_what_they_are_for() -> None:
    """The oracle of these tests: a flipped met, a missing direction, a path and a bad stamp
    are each found."""
    flipped = verdict(3.0, 2.0) | {"met": True}
    assert verdict(3.0, 2.0, at_most=flipped["at_most"])["met"] != flipped["met"]
    assert [p for p, _ in stated_verdicts({"a": {"b": {"value": 1, "target": 2, "met": True}}})]
    with pytest.raises(ValueError):
        assert_stamp({"when": "yesterday", "commit": UNKNOWN, "dirty": UNKNOWN}, "x")
    with pytest.raises(AssertionError):
        assert_stamp({"when": UNKNOWN, "commit": "0eac7fd", "dirty": False, "mode": UNKNOWN}, "x")
    assert set(context(0.5, "a slow path")) == {"value", "compared_with"}


def test_overview_flags_a_stored_verdict_that_disagrees(tmp_path: Path) -> None:
    base = {"benchmark": "x", "when": "2026-11-25T00:00:00+00:00", "machine": {"cpus": 2}}
    stored = {
        "targets": {
            "flipped": verdict(3.0, 2.0) | {"met": True},
            "undirected": {"value": 1.0, "target": 2.0, "met": True},
            "fine": verdict(1.0, 2.0),
        },
        "context": {"vs_slow": context(0.01, "a path slow by design")},
        "commit": UNKNOWN,
        "mode": UNKNOWN,
    }
    (tmp_path / "x.json").write_text(json.dumps(base | stored))
    found = {v.name: v for v in overview.verdicts(base | stored)}
    assert not found["targets.flipped"].met and not found["targets.flipped"].agrees
    assert found["targets.undirected"].recomputed is None
    assert found["targets.fine"].met and found["targets.fine"].agrees
    page = overview.render(tmp_path)
    assert "it disagrees" in page and "no direction stated" in page
    assert "1/3 met" in page  # an unjudged verdict counts as not met
    assert "Context, not targets" in page and "a path slow by design" in page
    assert "commit unknown" in page and "mode unknown" in page
