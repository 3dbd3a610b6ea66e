"""bench/ycsb at a tiny scale against the session router: load, then A-F, every operation checked
OK, and the files written in YCSB's layout (the layout and the files, not the speed). And the
checks themselves: a read that misses an acknowledged version, or finds nothing, is not OK."""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest

from bench import harness
from bench.stamps import mode_of
from bench.ycsb.__main__ import arguments, arguments_parser, workloads_of
from bench.ycsb.measurements import NOT_FOUND, OK, UNEXPECTED_STATE
from bench.ycsb.store import ShardlogStore
from bench.ycsb.suite import plan_layout, run_session, write_outputs
from router import clock
from services.router_process import RouterProcess
from tests.support import bearer

LINE = re.compile(r"^\[[A-Z-]+\], [A-Za-z0-9().=/_-]+, -?[0-9][0-9.E-]*$")
TINY = ["--recordcount", "60", "--operationcount", "40", "--threads", "2", "-p", "maxscanlength=5"]


async def test_tiny_session_writes_ycsb_output(
    router_process: RouterProcess, api_token: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(harness, "RESULTS", tmp_path)
    workloads = workloads_of(arguments(TINY))
    owner = f"ycsb-test-{uuid.uuid4().hex[:8]}"
    session = await run_session(router_process.url, bearer(api_token), workloads, owner)
    assert session.problems == [] and session.failed == 0
    # D and E inserted records beyond the 60 loaded, and every one was acknowledged.
    assert session.records > 60
    paths = write_outputs(session, mode_of(arguments_parser(), arguments(TINY)))
    names = ["load"] + [f"workload{letter}" for letter in "abcdef"]
    assert sorted(p.name for p in paths) == sorted(
        [f"{name}.txt" for name in names] + ["ycsb.json", "ycsb.png"]
    )
    for name in names:
        lines = (tmp_path / "ycsb" / f"{name}.txt").read_text().splitlines()
        assert lines[0].startswith("[OVERALL], RunTime(ms), ")
        assert lines[1].startswith("[OVERALL], Throughput(ops/sec), ")
        assert all(LINE.match(line) for line in lines), name
        operations = {
            line.split(", ")[0]: int(line.split(", ")[2])
            for line in lines
            if ", Operations, " in line
        }
        successes = {
            line.split(", ")[0]: int(line.split(", ")[2]) for line in lines if "Return=OK" in line
        }
        assert operations == successes and operations, name
    workload_f = (tmp_path / "ycsb" / "workloadf.txt").read_text()
    assert "[READ-MODIFY-WRITE], Operations, " in workload_f
    assert (
        "[SCAN], 99thPercentileLatency(us), " in (tmp_path / "ycsb" / "workloade.txt").read_text()
    )
    result = json.loads((tmp_path / "ycsb.json").read_text())
    assert result["targets"]["failed_operations"] == {
        "value": 0,
        "target": 0,
        "met": True,
        "at_most": True,
    }
    assert result["phases"]["load"]["by_operation"]["INSERT"]["operations"] == 60
    # The run's own stamp: this checkout's commit, and a mode that is neither quick nor full.
    assert re.fullmatch(r"[0-9a-f]{40}", result["commit"]) and isinstance(result["dirty"], bool)
    assert datetime.fromisoformat(result["when"]) > clock.now() - timedelta(hours=1)
    assert result["mode"]["quick"] is False and result["mode"]["full"] is False
    assert result["mode"]["arguments"]["recordcount"] == 60
    assert "base_port" not in result["mode"]["arguments"]
    assert (tmp_path / "ycsb.png").stat().st_size > 0


async def test_reads_are_checked_against_acknowledged_versions(
    router_process: RouterProcess, api_token: str
) -> None:
    workload = workloads_of(
        arguments(["-P", "bench/ycsb/workloads/workloada", "--recordcount", "5"])
    )[0]
    layout = plan_layout([workload], 100_000, clock.now())
    async with httpx.AsyncClient(base_url=router_process.url, headers=bearer(api_token)) as http:
        store = ShardlogStore(http, f"ycsb-test-{uuid.uuid4().hex[:8]}", workload, layout)
        assert (await store.write(1)).status == OK
        assert (await store.write(1)).status == OK
        read = await store.read(1)
        assert read.status == OK
        assert (await store.read(2)).status == NOT_FOUND
        # A version acknowledged but not stored (as if a write were lost) must be noticed.
        store.ledger.acknowledge(1, 5)
        lost = await store.read(1)
        assert lost.status == UNEXPECTED_STATE
        assert "returned version 1 after version 5" in str(lost.problem)
        assert (await store.scan(1, 3)).status == OK
        assert (await store.scan(2, 3)).status == NOT_FOUND
