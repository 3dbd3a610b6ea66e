"""bench/stamps: a result carries the stamp of the run that measured it, a payload cannot
overwrite it, and a partial re-run stamps only the parts it measured."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench import harness, stamps


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--data-dir", type=Path, default=Path("var/x"))
    parser.add_argument("--router-port", type=int, default=8090)
    parser.add_argument("-P", dest="files", action="append", type=Path)
    return parser


def test_mode_of_a_run() -> None:
    parser = _parser()
    assert stamps.mode_of(parser, parser.parse_args([])) == {
        "quick": False,
        "full": True,
        "arguments": {"rows": 1000, "repeats": 3, "files": None},
    }
    smaller = stamps.mode_of(parser, parser.parse_args(["--rows", "10", "-P", "/abs/workloada"]))
    assert smaller["full"] is False and smaller["arguments"]["rows"] == 10
    assert smaller["arguments"]["files"] == ["workloada"]  # no directory of this machine
    quick = stamps.mode_of(parser, parser.parse_args(["--quick", "--router-port", "1"]))
    assert quick["quick"] is True and quick["full"] is False
    assert stamps.mode_text(quick) == "quick"
    assert stamps.mode_text(smaller).startswith("custom rows=10")


def test_a_payload_cannot_overwrite_the_stamp() -> None:
    run = stamps.stamp("x", {"quick": True, "full": False, "arguments": {}})
    stale = {"when": "2026-11-23T00:00:00+00:00", "commit": "old", "machine": {}, "rows": 5}
    result = stamps.stamped(stale, run)
    assert result["when"] == run["when"] and result["commit"] == run["commit"]
    assert result["rows"] == 5 and result["machine"] == run["machine"]
    assert re.fullmatch(r"[0-9a-f]{40}", result["commit"])


def test_a_partial_run_stamps_its_part_and_keeps_the_others() -> None:
    first = stamps.stamp("x", {"quick": False, "full": True, "arguments": {}})
    first |= {"when": "2026-11-23T10:00:00+00:00"}
    whole = stamps.stamped({"rows": 1}, first, {"pages": True, "estimate": True})
    assert whole["several_runs"] is False and set(whole["parts"]) == {"pages", "estimate"}
    later = stamps.stamp("x", {"quick": False, "full": False, "arguments": {"part": "pages"}})
    again = stamps.stamped({"rows": 2}, later, {"pages": True, "estimate": False}, whole)
    assert again["parts"]["pages"]["when"] == later["when"]
    assert again["parts"]["pages"]["mode"]["arguments"] == {"part": "pages"}
    assert again["parts"]["estimate"] == whole["parts"]["estimate"]
    assert again["several_runs"] is True and again["when"] == later["when"]
    # A stored result without parts: its other part keeps the file's own stamp.
    legacy = {"when": "2026-11-20T00:00:00+00:00", "commit": stamps.UNKNOWN}
    mixed = stamps.stamped({}, later, {"pages": True, "estimate": False}, legacy)
    assert mixed["parts"]["estimate"]["when"] == legacy["when"]
    assert mixed["parts"]["estimate"]["mode"] == stamps.UNKNOWN


def test_write_results_stamps_and_redraw_keeps_the_stamp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(harness, "RESULTS", tmp_path)
    mode = {"quick": True, "full": False, "arguments": {"rows": 10}}

    def plot(payload: dict[str, Any]) -> Callable[[Any], None]:
        def draw(figure: Any) -> None:
            figure.add_subplot(1, 1, 1).bar(["a"], [payload["rows"]])

        return draw

    payload: dict[str, Any] = {"rows": 10, "when": "2000-01-01T00:00:00+00:00"}
    json_path, png_path = harness.write_results("x", payload, plot(payload), mode=mode)
    written = json.loads(json_path.read_text())
    assert written["when"] != payload["when"] and written["mode"] == mode
    assert png_path.stat().st_size > 0
    png_path.unlink()
    harness.redraw("x", plot)
    assert png_path.stat().st_size > 0
    assert json.loads(json_path.read_text()) == written
