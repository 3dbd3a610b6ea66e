"""pgBadger over the pass's lines of every shard log, day tables folded first (as in the
statement statistics) so that its query tables group one statement of every owner and day as
one. Writes index.html (to read) and pgbadger.json (what the bench's check reads)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from bench.pgbadger.verbose_logs import PGBADGER_PREFIX
from router.db.names import fold_day_tables


def build(logs: dict[str, str], out_dir: Path) -> dict[str, Any]:
    """Run pgBadger over ``logs`` (the pass's text by shard name) into ``out_dir``; its JSON."""
    program = shutil.which("pgbadger")
    if program is None:
        raise RuntimeError("pgbadger is not installed (Debian package pgbadger; make install)")
    shutil.rmtree(out_dir, ignore_errors=True)
    folded_dir = out_dir / "logs"
    folded_dir.mkdir(parents=True)
    files = []
    for name, text in sorted(logs.items()):
        path = folded_dir / f"{name}.log"
        path.write_text(fold_day_tables(text))
        files.append(str(path))
    subprocess.run(
        [
            program,
            "--quiet",
            "--format",
            "stderr",
            "--prefix",
            PGBADGER_PREFIX,
            # Absolute: pgBadger puts a second --outfile in the working directory, not --outdir.
            "--outfile",
            str((out_dir / "index.html").absolute()),
            "--outfile",
            str((out_dir / "pgbadger.json").absolute()),
            *files,
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    shutil.rmtree(folded_dir)
    report: dict[str, Any] = json.loads((out_dir / "pgbadger.json").read_text())
    return report


def count(report: dict[str, Any], start: str, part: str) -> int:
    """Executions of the normalised queries that begin with ``start`` and contain ``part``
    (both in lower case: pgBadger lowers all but quoted names), over every database."""
    return sum(
        int(entry.get("count", 0))
        for queries in report.get("normalyzed_info", {}).values()
        for query, entry in queries.items()
        if query.lower().startswith(start) and part in query.lower()
    )


def write_path_count(report: dict[str, Any]) -> int:
    """The one-statement write of a small part, and the COPY of a larger one
    (statements.write_path)."""
    return count(report, "with ", 'insert into "audit_on_yyyymmdd"') + count(
        report, "copy ", '"audit_on_yyyymmdd"'
    )


def search_page_count(report: dict[str, Any]) -> int:
    return count(report, "select ", 'from "audit_on_yyyymmdd"')
