"""Run every benchmark under bench/ (each a sub-package with a __main__ module)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path


def main() -> int:
    here = Path(__file__).parent
    suites = sorted(p.parent.name for p in here.glob("*/__main__.py"))
    if not suites:
        print("bench: no benchmarks yet")
        return 0
    for name in suites:
        print(f"== bench/{name}")
        runpy.run_module(f"bench.{name}", run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
