"""One sweep of the CRUD experiment through the HTTP API, at each batch size in turn: insert
every flow (POST /v1/flows), write them again with new counters (the merge path), search by
source address, by destination port and by full 5-tuple, delete every flow (DELETE /v1/flows)
and check that none is left. One client, one request at a time, as in the reports."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from bench.crud import flows
from bench.crud.flows import FlowSet
from bench.harness import Progress

OPERATIONS = ("insert", "update", "search_src_ip", "search_dst_port", "search_full_tuple", "delete")


@dataclass(frozen=True)
class Plan:
    batches: tuple[int, ...]
    # Matching rows each partial-key search pages through (then it stops): page size N costs
    # what it costs per row without reading every match at N = 100.
    search_rows: int
    # Full-tuple searches per batch size (each matches one flow).
    lookups: int


@dataclass
class Checks:
    """What the sweep verified besides timing it; every count should end at zero."""

    deleted_rows_left: int = 0
    delete_count_mismatches: int = 0
    search_count_mismatches: int = 0
    merge_mismatches: int = 0
    notes: list[str] = field(default_factory=list)

    def add(self, name: str, count: int, note: str) -> None:
        if count:
            setattr(self, name, getattr(self, name) + count)
            self.notes.append(note)


def cell(operation: str, batch: int, rows: int, requests: int, seconds: float) -> dict[str, Any]:
    return {
        "operation": operation,
        "batch": batch,
        "rows": rows,
        "requests": requests,
        "seconds": round(seconds, 4),
        "rows_per_s": round(rows / seconds, 1) if seconds > 0 else 0.0,
        "seconds_per_1m_rows": round(seconds * 1e6 / rows, 2) if rows else None,
    }


def _ok(response: httpx.Response, what: str) -> Any:
    if response.status_code != 200:
        raise RuntimeError(f"{what}: {response.status_code} {response.text[:300]}")
    return orjson.loads(response.content)


async def post_all(
    http: httpx.AsyncClient, records: list[dict[str, Any]], batch: int, label: str
) -> tuple[int, float]:
    bodies = flows.ndjson_bodies(records, batch)
    progress = Progress(label, len(records))
    started = time.perf_counter()
    for body, start in zip(bodies, range(0, len(records), batch), strict=True):
        response = await http.post(
            "/v1/flows", content=body, headers={"content-type": "application/x-ndjson"}
        )
        _ok(response, "POST /v1/flows")
        progress.advance(min(batch, len(records) - start))
    return len(bodies), time.perf_counter() - started


async def delete_all(
    http: httpx.AsyncClient, flowset: FlowSet, batch: int, checks: Checks
) -> tuple[int, float]:
    bodies = flows.delete_bodies(flowset, batch)
    progress = Progress(f"delete, {batch} per request", len(flowset.records))
    removed = 0
    started = time.perf_counter()
    for count, body in bodies:
        response = await http.request(
            "DELETE", "/v1/flows", content=body, headers={"content-type": "application/json"}
        )
        removed += _ok(response, "DELETE /v1/flows")["removed"]
        progress.advance(count)
    seconds = time.perf_counter() - started
    checks.add(
        "delete_count_mismatches",
        int(removed != len(flowset.records)),
        f"batch {batch}: DELETE removed {removed} of {len(flowset.records)} flows",
    )
    return len(bodies), seconds


async def page_through(
    http: httpx.AsyncClient, params: dict[str, Any], batch: int, most: int, progress: Progress
) -> tuple[int, int, float, bool]:
    """Pages of ``batch`` rows until ``most`` rows were read or the matches ran out: rows,
    requests, seconds, and whether every match was read."""
    rows = requests = 0
    cursor = None
    started = time.perf_counter()
    while True:
        query = {**params, "limit": batch, "partial": "false"}
        if cursor is not None:
            query["cursor"] = cursor
        page = _ok(await http.get("/v1/flows/search", params=query), "GET /v1/flows/search")
        requests += 1
        rows += len(page["items"])
        progress.advance(len(page["items"]))
        cursor = page["next_cursor"]
        if cursor is None or rows >= most:
            return rows, requests, time.perf_counter() - started, cursor is None


async def search_partial(
    http: httpx.AsyncClient,
    flowset: FlowSet,
    batch: int,
    plan: Plan,
    checks: Checks,
) -> list[dict[str, Any]]:
    searches = (
        ("search_src_ip", {"src_ip": flowset.busy_host}, flowset.busy_host_rows),
        ("search_dst_port", {"dst_port": str(flowset.service_port)}, flowset.service_port_rows),
    )
    cells = []
    for operation, key, expected in searches:
        progress = Progress(f"{operation}, {batch} per page", min(plan.search_rows, expected))
        rows, requests, seconds, complete = await page_through(
            http, {**flowset.window, **key}, batch, plan.search_rows, progress
        )
        checks.add(
            "search_count_mismatches",
            int(complete and rows != expected),
            f"batch {batch}: {operation} found {rows} rows, the data holds {expected}",
        )
        cells.append(cell(operation, batch, rows, requests, seconds))
    return cells


async def search_full_tuples(
    http: httpx.AsyncClient, flowset: FlowSet, batch: int, plan: Plan, checks: Checks
) -> dict[str, Any]:
    """Full 5-tuple searches of flows spread over the data set; each finds its one flow, which
    the update merged into: flow_count 2."""
    step = max(1, len(flowset.records) // plan.lookups)
    chosen = flowset.records[::step][: plan.lookups]
    progress = Progress(f"search_full_tuple, {batch} per page", len(chosen))
    wrong = rows = 0
    started = time.perf_counter()
    for record in chosen:
        params = {
            **flowset.window,
            "switch": record["switch"],
            "src_ip": record["src_ip"],
            "dst_ip": record["dst_ip"],
            "src_port": str(record["src_port"]),
            "dst_port": str(record["dst_port"]),
            "proto": record["proto"],
            "limit": batch,
            "partial": "false",
        }
        page = _ok(await http.get("/v1/flows/search", params=params), "GET /v1/flows/search")
        rows += len(page["items"])
        wrong += int([item["flow_count"] for item in page["items"]] != [2])
        progress.advance()
    seconds = time.perf_counter() - started
    checks.add(
        "merge_mismatches",
        wrong,
        f"batch {batch}: {wrong} of {len(chosen)} full-tuple searches did not find one flow "
        "of flow_count 2",
    )
    return cell("search_full_tuple", batch, rows, len(chosen), seconds)


async def rows_left(http: httpx.AsyncClient, flowset: FlowSet) -> int:
    page = _ok(
        await http.get(
            "/v1/flows/search", params={**flowset.window, "limit": 10, "partial": "false"}
        ),
        "GET /v1/flows/search",
    )
    return len(page["items"])


async def run(
    url: str, headers: dict[str, str], flowset: FlowSet, plan: Plan, checks: Checks
) -> list[dict[str, Any]]:
    """Every operation at every batch size; the data set is gone again at the end of each."""
    update = flows.repeated(flowset.records, seed=len(flowset.records))
    cells: list[dict[str, Any]] = []
    async with httpx.AsyncClient(base_url=url, timeout=600, headers=headers) as http:
        for batch in plan.batches:
            total = len(flowset.records)
            requests, seconds = await post_all(
                http, flowset.records, batch, f"insert, {batch} per request"
            )
            cells.append(cell("insert", batch, total, requests, seconds))
            requests, seconds = await post_all(http, update, batch, f"update, {batch} per request")
            cells.append(cell("update", batch, total, requests, seconds))
            cells += await search_partial(http, flowset, batch, plan, checks)
            cells.append(await search_full_tuples(http, flowset, batch, plan, checks))
            requests, seconds = await delete_all(http, flowset, batch, checks)
            cells.append(cell("delete", batch, total, requests, seconds))
            left = await rows_left(http, flowset)
            checks.add("deleted_rows_left", left, f"batch {batch}: {left} flows left after delete")
            for done in cells[-len(OPERATIONS) :]:
                print(
                    f"  batch {batch:>7,} {done['operation']:18} {done['rows_per_s']:>12,.0f} "
                    f"rows/s {done['seconds_per_1m_rows']:>10} s per 1M rows",
                    flush=True,
                )
    return cells
