"""bench/pgbadger at a tiny scale: both reports exist and count the write path and the search
statement as one entry each, within 5 % of the requests sent."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bench.pgbadger.__main__ import main
from tests.bench.conftest import own_ports

WRITES = 120
SEARCHES = 80


@pytest.mark.slow
def test_a_tiny_pass_counts_each_kind_as_one_entry(results: Path, tmp_path: Path) -> None:
    flags = ["--writes", str(WRITES), "--searches", str(SEARCHES), "--shards", "2"]
    flags += ["--owners", "3", "--clients", "2", "--data-dir", str(tmp_path / "cluster")]
    assert main([*flags, *own_ports(2)]) == 0

    payload = json.loads((results / "pgbadger.json").read_text())
    assert (results / "pgbadger.png").stat().st_size > 0
    # The report is linked relative to bench/results; the run's own stamp and mode.
    assert payload["pgbadger_report"] == "pgbadger/index.html"
    html = (results / payload["pgbadger_report"]).read_text()
    assert re.fullmatch(r"[0-9a-f]{40}", payload["commit"]), payload["commit"]
    assert payload["mode"]["full"] is False and payload["mode"]["arguments"]["writes"] == WRITES
    assert "data_dir" not in payload["mode"]["arguments"]
    assert "pgBadger" in html
    assert payload["statistics_missing"] == []
    for source in ("pg_stat_statements", "pgbadger"):
        for kind, sent in (("write", WRITES), ("search", SEARCHES)):
            assert abs(payload["counts"][f"{source}_{kind}"] - sent) <= 0.05 * sent, payload
            target = payload["targets"][f"{source}_{kind}_count_error_pct"]
            assert set(target) == {"value", "target", "met", "at_most"}
            assert target["met"] is True
    # Small parts are written by one statement (router/ingest/statements.py), folded to one
    # entry whatever day table it names.
    writes = [
        e
        for e in payload["top_by_calls"]
        if e["query"].startswith("WITH ") and 'INSERT INTO "audit_oN_YYYYMMDD"' in e["query"]
    ]
    # pg_stat_statements may list it under two query ids (statements.write_path sums them).
    assert 1 <= len(writes) <= 2, payload["top_by_calls"]
    assert set(payload["top_by_time_per_shard"]) == {"shard01", "shard02"}
