"""One clock: no code reads "now" from the wall clock behind router/clock.py's back.

A static scan (ast) of router/, services/, bench/ and tests/ for ``datetime.now(``,
``datetime.utcnow(``, ``date.today(``, ``time.time(`` and ``time.time_ns(``: "now" is
``router.clock.now()``, ``today()`` or ``time()``; durations and deadlines are
``time.monotonic()`` or ``time.perf_counter()``. A shifted test clock (docs/operations.md,
"Tests at any hour") only holds if every reading goes through the one clock.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("router", "services", "bench", "tests")
WALL_READS = {
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("date", "today"),
    ("time", "time"),
    ("time", "time_ns"),
}

# The few readings that must be the real wall clock, each with its reason.
ALLOWED = {
    # The clock itself: the wall clock it shifts or replaces.
    "router/clock.py",
    # The tail's lag metric: arrival against the database's commit time, which PostgreSQL
    # stamps with the wall clock (a shifted test clock would report a lag of the shift).
    "router/tail/service.py",
    # The clock's own tests: they compare it with the wall clock it is built on.
    "tests/unit/test_clock.py",
}


def wall_reads(source: str) -> list[tuple[int, str]]:
    """(line, call) of every ``datetime.now(``-like call in ``source``."""
    tree = ast.parse(source)
    # ``import time as _time``, ``from datetime import datetime as dt``: read through aliases.
    aliases = {
        alias.asname: alias.name.rsplit(".", 1)[-1]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
        if alias.asname
    }
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner = node.func.value
        owner_name = (
            aliases.get(owner.id, owner.id)
            if isinstance(owner, ast.Name)
            else owner.attr
            if isinstance(owner, ast.Attribute)
            else None
        )
        if (owner_name, node.func.attr) in WALL_READS:
            found.append((node.lineno, f"{owner_name}.{node.func.attr}("))
    return found


def test_the_scan_finds_every_kind_of_wall_read() -> None:
    source = (
        "import datetime as dt, time as wall\n"
        "from datetime import date as day\n"
        "a = datetime.now(UTC)\n"
        "b = dt.datetime.utcnow()\n"
        "c = day.today()\n"
        "d = wall.time()\n"
        "e = clock.now(); f = time.monotonic(); g = clock.time()\n"
        "h = time.time_ns()\n"
    )
    assert [line for line, _ in wall_reads(source)] == [3, 4, 5, 6, 8]


def test_every_reading_of_now_goes_through_the_one_clock() -> None:
    offenders = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative in ALLOWED:
                continue
            for line, call in wall_reads(path.read_text()):
                offenders.append(f"{relative}:{line}: {call}")
    assert not offenders, (
        "read now from router.clock (now(), today(), time()), durations from time.monotonic():\n"
        + "\n".join(offenders)
    )


def test_every_allowed_file_still_reads_the_wall_clock() -> None:
    """An allow-list entry that no longer reads the wall clock is stale: drop it."""
    for relative in ALLOWED:
        assert wall_reads((ROOT / relative).read_text()), relative
