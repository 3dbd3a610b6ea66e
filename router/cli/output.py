"""How CLI commands print: aligned text tables, or JSON with --json."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from typing import Any


def print_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    cells = [[("-" if row.get(c) is None else str(row.get(c))) for c in columns] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    print("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row_cells in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row_cells, widths, strict=True)).rstrip())


def output(args: argparse.Namespace, data: Any, table: Callable[[], None]) -> None:
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2))
    else:
        table()
