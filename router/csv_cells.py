"""CSV cells of text that anyone may have written (owner keys, switch names, log lines)."""

from __future__ import annotations

# A cell a spreadsheet would read as a formula.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """``value`` as a CSV cell: None empty; text that starts like a formula behind a quote."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value
