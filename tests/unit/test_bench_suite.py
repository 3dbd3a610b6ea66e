"""`make bench` runs every benchmark: the packages, and the modules bench/__main__.py lists."""

import importlib
from pathlib import Path

from bench.__main__ import MODULES

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_listed_modules_are_benchmarks() -> None:
    for name in MODULES:
        module = importlib.import_module(f"bench.{name}")
        assert callable(module.main), name


def test_every_runnable_module_is_listed() -> None:
    runnable = {
        f"{path.parent.name}.{path.stem}"
        for path in BENCH.glob("*/*.py")
        if path.stem != "__main__" and 'if __name__ == "__main__":' in path.read_text()
    }
    # Helpers a benchmark starts in a process of its own, not benchmarks.
    helpers = {"auth.twin", "collector.fixtures"}
    assert runnable - helpers == set(MODULES)
