"""The founding reports' figures (bench/crud/reference.json) as context beside ours: which of
their tables sit beside which benchmark, each with its source and machine, and, where one of
our committed figures measures the same thing, ours next to theirs. Never targets."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REFERENCE = Path(__file__).parent / "crud" / "reference.json"
REFERENCE_NAME = "bench/crud/reference.json"

# A figure's fields in the order its table shows them (those no figure of a table has are left
# out); value and unit are shown together.
FIGURE_COLUMNS = ("system", "phase", "operation", "rows", "batch", "shared_buffers")
FIGURE_EXTRAS = ("p95_us", "p99_us", "caveat")


@dataclass(frozen=True)
class ReferenceTable:
    """One table of a report: what was measured and how, on what, and its figures."""

    name: str
    title: str
    source: Mapping[str, Any]
    measured: str
    caveats: list[str]
    figures: list[dict[str, Any]]


def load(path: Path = REFERENCE) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def tables_beside(benchmark: str, reference: Mapping[str, Any]) -> list[ReferenceTable]:
    """The reports' tables that sit beside ``benchmark`` (a results file's name)."""
    found = []
    for name, table in reference.get("tables", {}).items():
        if benchmark not in table.get("beside", ()):
            continue
        found.append(
            ReferenceTable(
                name=name,
                title=table["title"],
                source=reference["sources"][table["source"]],
                measured=table.get("measured", ""),
                caveats=list(table.get("caveats", ())),
                figures=[f for f in reference["figures"] if f["table"] == name],
            )
        )
    return found


def text(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, float):
        # As stored where that is short, else rounded.
        if len(repr(value)) <= 8:
            return f"{value:,}"
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return str(value)


def caption(table: ReferenceTable) -> str:
    source = table.source
    return (
        f"{table.title} ({source['report']}, {source['url']}). System: {source['system']}. "
        f"Machine: {source['machine']}. Measured: {table.measured}. "
        f"Caveats: {'; '.join(table.caveats)}."
    )


def side_by_side(
    benchmark: str, table: ReferenceTable, result: Mapping[str, Any], ours_header: str
) -> tuple[list[str], list[list[str]]]:
    """Header and rows of one report table: the figure's fields, theirs, ours where one of our
    figures measures the same thing (the column only when any does), then the caveats."""
    present = {key for figure in table.figures for key in figure}
    fields = [c for c in FIGURE_COLUMNS if c in present]
    extras = [c for c in FIGURE_EXTRAS if c in present]
    paired = [ours(benchmark, f, result) for f in table.figures]
    header = [*fields, "theirs", *([ours_header] if any(paired) else []), *extras]
    rows = []
    for figure, mine in zip(table.figures, paired, strict=True):
        row = [text(figure.get(c)) for c in fields]
        row.append(f"{text(figure['value'])} {figure['unit']}")
        if any(paired):
            row.append(text(mine))
        rows.append(row + [text(figure.get(c)) for c in extras])
    return header, rows


def ours(benchmark: str, figure: Mapping[str, Any], result: Mapping[str, Any]) -> str | None:
    """Our committed figure measuring what ``figure`` measures, with its unit, or None."""
    if benchmark == "crud":
        return _ours_crud(figure, result)
    if benchmark == "ycsb":
        return _ours_ycsb(figure, result)
    if figure.get("unit") == "rows/s":
        return _ours_rate(benchmark, str(figure.get("operation", "")), result)
    return None


# Which of our rates measures what a report's write rate does, by words of its operation.
_RATES = {
    "ingest": (
        ("COPY", "raw_copy.audit.rows_per_s", "raw binary COPY"),
        ("insert", "best.audit.rows_per_s", "best REST audit"),
    ),
    "grid": (
        ("while", "mixed.rows_per_s", "paced writes beside searches"),
        ("BRIN on ts", "time_index.brin.rows_per_s", "COPY into a BRIN day table"),
        ("btree on ts", "time_index.btree.rows_per_s", "COPY into a btree day table"),
    ),
}


def _ours_rate(benchmark: str, operation: str, result: Mapping[str, Any]) -> str | None:
    for words, path, what in _RATES.get(benchmark, ()):
        if words in operation:
            value: Any = result
            for key in path.split("."):
                value = value.get(key) if isinstance(value, Mapping) else None
            return None if value is None else f"{text(value)} rows/s ({what})"
    return None


def _ours_crud(figure: Mapping[str, Any], result: Mapping[str, Any]) -> str | None:
    if figure.get("unit") != "s per 1M rows":
        return None
    cells = [
        c
        for c in result.get("cells", ())
        if c.get("operation") == figure.get("operation") and c.get("batch") == figure.get("batch")
    ]
    if not cells:
        return None
    same = [c for c in cells if c.get("shared_buffers") == figure.get("shared_buffers")]
    # Without our run at their setting, ours at the largest setting we ran.
    cell = same[0] if same else cells[-1]
    return f"{text(cell['seconds_per_1m_rows'])} s per 1M rows ({cell.get('shared_buffers', '?')})"


def _ours_ycsb(figure: Mapping[str, Any], result: Mapping[str, Any]) -> str | None:
    phase = result.get("phases", {}).get(figure.get("phase"))
    if not isinstance(phase, Mapping):
        return None
    if figure.get("operation") == "overall" and figure.get("unit") == "ops/s":
        value = phase.get("throughput_ops_s")
        return None if value is None else f"{text(value)} ops/s"
    measured = phase.get("by_operation", {}).get(figure.get("operation"))
    if figure.get("unit") != "us avg" or not isinstance(measured, Mapping):
        return None
    return f"{text(measured['average_us'])} us avg"
