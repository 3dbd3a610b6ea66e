"""Run every benchmark under bench/ (each a sub-package with a __main__ module, and the
measurements that live as modules beside one), then render bench/results/index.html from
their results."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

from bench import overview

# Benchmarks that are a module of a package rather than a package (each runs alone too).
MODULES = (
    "ingest.cpu",
    "ingest.small",
    "ingest.storage",
    "ingest.merge_variants",
    "ingest.placement",
    "search.rate",
    "search.mixed",
    "search.export",
    "search.compacted",
    "hostile.decoders",
    "tail.writes",
    "owners.big",
)


def main() -> int:
    here = Path(__file__).parent
    suites = [*sorted(p.parent.name for p in here.glob("*/__main__.py")), *MODULES]
    if not suites:
        print("bench: no benchmarks yet")
        return 0
    failed = []
    for name in suites:
        print(f"== bench/{name}", flush=True)
        # Each benchmark ends with sys.exit(main()): its status, not the end of the run.
        try:
            runpy.run_module(f"bench.{name}", run_name="__main__")
        except SystemExit as exit_:
            if exit_.code not in (0, None):
                failed.append(name)
    rendered = overview.main([])
    if failed:
        print(f"bench: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return rendered


if __name__ == "__main__":
    sys.exit(main())
