"""bench/crud at a tiny scale against the session cluster: every cell is measured, the checks
hold (merged counters, exact search counts, nothing left after DELETE) and the result files
have their layout."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest

from bench import harness
from bench.crud import flows, results
from bench.crud.sweep import OPERATIONS, Checks, Plan, run
from services.router_process import RouterProcess
from tests.support import bearer

BATCHES = (10, 100)


async def test_crud_sweep_measures_every_cell_and_leaves_nothing(
    router_process: RouterProcess,
    api_token: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    prefix = f"crud-{uuid.uuid4().hex[:8]}-"
    flowset = flows.generate(240, seed=5, switch_prefix=prefix, switches=4, hot_rows=20)
    plan = Plan(batches=BATCHES, search_rows=10_000, lookups=5)
    checks = Checks()
    cells = await run(router_process.url, bearer(api_token), flowset, plan, checks)

    async with httpx.AsyncClient(
        base_url=router_process.url, headers=bearer(api_token), timeout=30
    ) as http:
        left = await http.get("/v1/flows/search", params={**flowset.window, "limit": 10})
    assert left.status_code == 200
    assert left.json()["items"] == []
    assert (checks.deleted_rows_left, checks.delete_count_mismatches) == (0, 0)
    assert (checks.search_count_mismatches, checks.merge_mismatches) == (0, 0), checks.notes

    monkeypatch.setattr(harness, "RESULTS", tmp_path)
    document = results.payload(len(flowset.records), 5, 4, plan, flowset, {"64MB": (cells, checks)})
    mode = {"quick": True, "full": False, "arguments": {"rows": 240}}
    json_path, png_path = results.write(document, mode)
    saved = json.loads(json_path.read_text())
    assert saved["mode"] == mode and saved["benchmark"] == "crud"
    assert png_path.stat().st_size > 0
    assert {(c["operation"], c["batch"]) for c in saved["cells"]} == {
        (operation, batch) for operation in OPERATIONS for batch in BATCHES
    }
    for found in saved["cells"]:
        assert found["rows_per_s"] > 0, found
        assert found["shared_buffers"] == "64MB"
    by_cell = {(c["operation"], c["batch"]): c for c in saved["cells"]}
    assert by_cell[("insert", 10)]["requests"] == len(flowset.records) // 10
    assert by_cell[("search_src_ip", 10)]["rows"] == flowset.busy_host_rows
    assert by_cell[("search_dst_port", 100)]["rows"] == flowset.service_port_rows
    assert set(saved["targets"]) == set(results.CHECKS)
    for target in saved["targets"].values():
        assert set(target) == {"value", "target", "met", "at_most"}
        assert target["met"] is True
    assert saved["reference"] == results.REFERENCE_NAME
    assert json.loads(results.REFERENCE.read_text())["figures"]
    table = results.table(saved)
    assert sum(line.startswith("| ") for line in table) == 1 + len(OPERATIONS) * len(BATCHES)
