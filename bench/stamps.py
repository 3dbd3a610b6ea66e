"""The stamp every benchmark result carries: when it was measured, by which commit (and whether
the code under test had uncommitted changes), on what machine, and in which mode (quick or full,
repeats, data sizes). A benchmark measured in parts (``python -m bench.search --part pages``)
stamps each part it measured; the parts it did not measure keep the stamp of their own run."""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from router import clock

REPOSITORY = Path(__file__).resolve().parent.parent
# A figure measured before results were stamped: its commit or mode is not known.
UNKNOWN = "unknown"
# The keys of a result that are its stamp, never its figures: a payload cannot set them.
KEYS = ("benchmark", "when", "commit", "dirty", "machine", "mode", "parts", "several_runs")
# The code a benchmark measures: uncommitted changes here make its commit an approximation.
_CODE = ("router", "services", "native", "bench", ":!bench/results")
_PART_KEYS = ("when", "commit", "dirty", "mode")
# Arguments that say where a run wrote or whom it talked to, not what it measured.
_PLUMBING = frozenset(("data_dir", "keep", "replot", "url", "token", "owner", "name", "baseline"))


def _git(*arguments: str, cwd: Path = REPOSITORY) -> str | None:
    try:
        done = subprocess.run(
            ["git", *arguments], cwd=cwd, capture_output=True, text=True, timeout=30, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def commit_of(checkout: Path = REPOSITORY) -> str:
    """The commit checked out in ``checkout`` (this repository by default), or "unknown"."""
    return _git("rev-parse", "HEAD", cwd=checkout) or UNKNOWN


def dirty(checkout: Path = REPOSITORY) -> bool | str:
    """Whether the measured code (router, services, native, bench but its results) differs
    from the commit; "unknown" outside a git checkout."""
    changes = _git("status", "--porcelain", "--", *_CODE, cwd=checkout)
    return UNKNOWN if changes is None else bool(changes)


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def mode_of(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Any]:
    """The mode of a run from its command line: ``quick`` as given (False where the benchmark
    has no --quick), its sizes, repeats and other measuring arguments (ports, data directory
    and the like left out), and ``full``: not quick and every such argument at its default."""
    arguments: dict[str, Any] = {}
    defaults = True
    for action in parser._actions:
        key = action.dest
        if key == "help" or key in _PLUMBING or key.endswith("port"):
            continue
        value = _plain(getattr(args, key, None))
        arguments[key] = value
        defaults = defaults and value == _plain(parser.get_default(key))
    quick = bool(arguments.pop("quick", False))
    return {"quick": quick, "full": defaults and not quick, "arguments": arguments}


def _plain(value: Any) -> Any:
    """A value as JSON states it: a path by its name only (no machine's directories)."""
    if isinstance(value, Path):
        return value.name
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def stamp(name: str, mode: Mapping[str, Any]) -> dict[str, Any]:
    """This run's stamp."""
    return {
        "benchmark": name,
        "when": clock.now().isoformat(timespec="seconds"),
        "commit": commit_of(),
        "dirty": dirty(),
        "machine": machine(),
        "mode": dict(mode),
    }


def stamped(
    payload: Mapping[str, Any],
    run: Mapping[str, Any],
    parts: Mapping[str, bool] | None = None,
    earlier: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``payload`` under ``run``'s stamp (whatever stamp keys the payload holds are dropped).
    With ``parts`` (every part of the benchmark, and whether this run measured it): each part
    this run measured gets its stamp; the others keep their stamp in ``earlier`` (the stored
    result), or its top-level one, or "unknown"; ``several_runs`` says whether the file holds
    figures of more than one run."""
    result = {**run, **{k: v for k, v in payload.items() if k not in KEYS}}
    if parts is None:
        return result
    earlier = earlier or {}
    kept = earlier.get("parts", {})
    fallback = {k: earlier.get(k, UNKNOWN) for k in _PART_KEYS}
    result["parts"] = {
        part: {k: run[k] for k in _PART_KEYS} if measured else kept.get(part, fallback)
        for part, measured in parts.items()
    }
    result["several_runs"] = len({(p["when"], p["commit"]) for p in result["parts"].values()}) > 1
    return result


def caption(result: Mapping[str, Any]) -> str:
    """The stamp of a result on one line, as its plot carries it."""
    stamp = result.get("parts") or {"": result}
    return " · ".join(
        f"{part + ': ' if part else ''}{_short(p.get('commit'), p.get('dirty'))}, "
        f"{p.get('when', UNKNOWN)}, {mode_text(p.get('mode', UNKNOWN))}"
        for part, p in stamp.items()
    )


def mode_text(mode: Any) -> str:
    """The mode in words: quick, full, the arguments of a run that was neither, or what is
    known of a mode stored before results carried one."""
    if not isinstance(mode, Mapping):
        return "mode unknown"
    if mode.get("quick") is True:
        return "quick"
    if mode.get("full") is True:
        return "full"
    arguments = mode.get("arguments")
    if isinstance(arguments, Mapping):
        return "custom " + " ".join(f"{k}={v}" for k, v in arguments.items())
    return "not quick, arguments unknown" if mode.get("quick") is False else "mode unknown"


def _short(commit: Any, changed: Any) -> str:
    if not isinstance(commit, str) or commit == UNKNOWN:
        return "commit unknown"
    return f"commit {commit[:10]}" + (" (uncommitted changes)" if changed is True else "")
