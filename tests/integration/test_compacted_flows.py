"""Compacted flow days (docs/architecture.md, "Compacted days", "Flows"): flows of several switches
on a past day are searched in many forms, exported, reported and fetched by ref; every owner-day
is then compacted by `shardlog compact --kind flow` and the same requests must give the same
answers, cursors taken on the heap must continue on the segments. Late records of 5-tuples that
a segment holds merge into their flow (moved back into the heap first): each flow stays one row
with the summed counters, the oracle being the test's own sums of what it wrote."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import random
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
import orjson
import pytest

from bench.shard_view import catalog_shards, day_tables, owner_id, shard_sql
from router.cli.lifecycle import context
from router.compaction.runner import Compactor
from router.db.names import DayTable, parse_day_table
from router.settings import Settings
from tests.integration import test_compacted_reads as compacted_reads
from tests.integration.test_compacted_reads import answer, answers_alike, cursors_continue, pages
from tests.integration.test_search import key_of
from tests.support import cli_env, holding, map_audit_owner, past_day, run_cli

DAY = past_day(3, 0)
WINDOW = {"from": DAY.isoformat(), "to": (DAY + timedelta(days=1)).isoformat()}
FLOWS_PER_SWITCH = 60
FORMS: list[dict[str, Any]] = [
    {},
    {"src_ip": "10.1.0.0/16"},
    {"dst_port": "443"},
    {"proto": 17, "ip_version": 4},
    {"src_ip": "192.0.2.3", "either_direction": "true"},
    {"ip_version": 6},
    {"consistent": "true"},
]
ORDERS = ["asc", "desc"]
LIMITS = [7, 1000]
SEARCH = "/v1/flows/search"


@dataclass
class Flow:
    """A 5-tuple the test wrote and what its row must show: the oracle."""

    switch: str
    src_ip: str
    dst_ip: str
    src_port: int
    dst_port: int
    proto: int | None
    first_seen: datetime
    last_seen: datetime
    bytes: int = 0
    packets: int = 0
    flow_count: int = 0

    def record(self, ts: datetime, size: int) -> dict[str, Any]:
        """A record of this flow at ``ts`` of ``size`` bytes, added to the oracle."""
        self.first_seen, self.last_seen = min(self.first_seen, ts), max(self.last_seen, ts)
        self.bytes, self.packets, self.flow_count = (
            self.bytes + size,
            self.packets + 2,
            self.flow_count + 1,
        )
        record = {
            "switch": self.switch,
            "ts": ts.isoformat(),
            "src_ip": self.src_ip,
            "dst_ip": self.dst_ip,
            "src_port": self.src_port,
            "dst_port": self.dst_port,
            "bytes": size,
            "packets": 2,
        }
        if self.proto is not None:
            record["proto"] = self.proto
        return record

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.src_ip, self.dst_ip, self.src_port, self.dst_port, self.proto)


def flows_of(switch: str, rng: random.Random) -> list[Flow]:
    flows = []
    for n in range(FLOWS_PER_SWITCH):
        v6 = n % 5 == 0
        ts = DAY + timedelta(hours=6, seconds=rng.randrange(25))  # ties on ts, broken by id
        flows.append(
            Flow(
                switch,
                str(ipaddress.ip_address(f"2001:db8::{n:x}")) if v6 else f"10.1.{n % 4}.{n}",
                "2001:db8::1" if v6 else f"192.0.2.{n % 5}",
                1000 + n,
                rng.choice([443, 53, 80]),
                rng.choice([6, 17, None]),
                ts,
                ts,
            )
        )
    return flows


def post(api: httpx.Client, records: list[dict[str, Any]], idempotent: bool = False) -> None:
    """NDJSON; with an Idempotency-Key a small part is one INSERT, without one it goes
    through COPY and the staging table: both merge paths."""
    headers = {"content-type": "application/x-ndjson"}
    if idempotent:
        headers["Idempotency-Key"] = uuid.uuid4().hex
    body = b"".join(orjson.dumps(r) + b"\n" for r in records)
    response = api.post("/v1/flows", content=body, headers=headers)
    assert response.status_code == 200, response.text


def forms(switches: list[str]) -> list[dict[str, Any]]:
    return compacted_reads.forms(switches, FORMS, "switch", WINDOW)


def export(api: httpx.Client, switches: list[str], format: str) -> bytes:
    return compacted_reads.export(api, switches, format, "/v1/flows/export")


def report(api: httpx.Client, switches: list[str]) -> Any:
    params = {
        "switch": switches,
        **WINDOW,
        "group_by": "switch,dst_port",
        "metrics": "bytes,packets,rows",
    }
    response = api.get("/v1/flows/report", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def segment_rows(api: httpx.Client, switch: str) -> int:
    """The rows the switch's segments of the day hold, on every shard."""
    ident = owner_id(api, "flow", switch)
    assert ident is not None
    dsns = catalog_shards(api)
    total = 0
    for shard, names in day_tables(api, "flow", ident).items():
        for name in names:
            table = parse_day_table(name)
            assert table is not None
            total += int(
                shard_sql(
                    dsns[shard],
                    f"SELECT coalesce(sum(rows), 0) FROM {table.segments} WHERE owner_id = {ident}",
                )
            )
    return total


@pytest.fixture(scope="module")
def compacted(api, settings) -> dict[str, Any]:
    """The answers on the heap, then every owner-day compacted."""
    tag = uuid.uuid4().hex[:8]
    switches = [f"packed-flows-{tag}-{n}" for n in range(3)]
    late = f"packed-flows-{tag}-late"
    rng = random.Random(37)
    flows = {switch: flows_of(switch, rng) for switch in [*switches, late]}
    for of_switch in flows.values():
        records = [flow.record(flow.first_seen, rng.randrange(40, 4000)) for flow in of_switch]
        # Every third flow merged into before the compaction (merged_xid under its snapshot).
        records += [
            flow.record(flow.first_seen + timedelta(minutes=5), 100) for flow in of_switch[::3]
        ]
        for start in range(0, len(records), 25):
            post(api, records[start : start + 25])
    before = {
        "forms": {orjson.dumps(p): answer(pages(api, p, path=SEARCH)) for p in forms(switches)},
        "first_pages": {orjson.dumps(p): api.get(SEARCH, params=p).json() for p in forms(switches)},
        "export": {f: export(api, switches, f) for f in ("ndjson", "csv")},
        "report": report(api, switches),
    }
    # The first switch's heap is kept: its rows are in the heap and the segments both.
    for switch in [*switches, late]:
        compacted_reads.compact(settings, switch, clear=switch != switches[0], kind="flow")
    return {"switches": switches, "late": late, "flows": flows, "before": before}


def test_every_flow_search_answers_as_on_the_heap(api, compacted) -> None:
    answers_alike(api, compacted["before"], SEARCH)


def test_a_cursor_taken_on_the_heap_continues_on_the_segments(api, compacted) -> None:
    cursors_continue(api, compacted["before"], SEARCH)


def test_refs_issued_on_the_heap_resolve_to_the_same_flows(api, compacted) -> None:
    key = orjson.dumps(forms(compacted["switches"])[1])  # limit 1000, ascending
    compacted_reads.refs_resolve(
        api, compacted["before"], key, 3 * FLOWS_PER_SWITCH, "/v1/flows/rows"
    )


def test_exports_reports_and_estimates_read_the_segments_alike(api, compacted) -> None:
    switches = compacted["switches"]
    for format, body in compacted["before"]["export"].items():
        assert export(api, switches, format) == body
    assert report(api, switches) == compacted["before"]["report"]
    params = {"switch": switches, **WINDOW, "dst_port": "443", "limit": 1}
    exact = api.get(SEARCH, params={**params, "count": "exact"}).json()["count"]
    estimated = api.get(SEARCH, params={**params, "count": "estimate"}).json()["count"]
    # Few candidate segments: the estimate opens every one (router/search/segment_estimate.py).
    assert estimated == {**exact, "method": "segments", "bounds": [exact["value"]] * 2}


def shown(api: httpx.Client, switch: str, order: str, limit: int) -> list[dict[str, Any]]:
    params = {"switch": switch, **WINDOW, "order": order, "limit": limit}
    return [item for page in pages(api, params, path=SEARCH) for item in page["items"]]


def assert_one_row_per_flow(api: httpx.Client, flows: list[Flow]) -> None:
    """Each flow once, with the oracle's sums, in key order both ways; counts, a report and
    refs agree."""
    switch = flows[0].switch
    expected = {flow.key: flow for flow in flows}
    for order in ORDERS:
        for limit in (7, 1000):
            items = shown(api, switch, order, limit)
            keys = [
                (i["src_ip"], i["dst_ip"], i["src_port"], i["dst_port"], i["proto"]) for i in items
            ]
            assert sorted(keys, key=repr) == sorted(expected, key=repr), (order, limit)
            for item, flow_key in zip(items, keys, strict=True):
                flow = expected[flow_key]
                assert (item["bytes"], item["packets"], item["flow_count"]) == (
                    flow.bytes,
                    flow.packets,
                    flow.flow_count,
                )
                assert datetime.fromisoformat(item["first_seen"]) == flow.first_seen
                assert datetime.fromisoformat(item["last_seen"]) == flow.last_seen
            ordered = [key_of(i) for i in items]
            assert ordered == sorted(ordered, reverse=order == "desc")
    # Refs, in the heap or in a segment, resolve to the rows as listed.
    for item in items[::5]:
        assert api.get(f"/v1/flows/rows/{item['ref']}").json() == item
    params = {"switch": switch, **WINDOW, "limit": 1, "count": "exact"}
    assert api.get(SEARCH, params=params).json()["count"]["value"] == len(flows)
    totals = api.get(
        "/v1/flows/report", params={"switch": switch, **WINDOW, "metrics": "bytes,rows"}
    ).json()["groups"]
    assert [(g["bytes"], g["rows"]) for g in totals] == [(sum(f.bytes for f in flows), len(flows))]


@pytest.mark.parametrize("which", ["cleared", "heap kept"])
def test_late_records_merge_into_their_flow_once(api, compacted, which) -> None:
    switch = compacted["late"] if which == "cleared" else compacted["switches"][0]
    flows: list[Flow] = compacted["flows"][switch]
    packed_before = segment_rows(api, switch)
    rng = random.Random(which)
    merged = flows[::4]
    # Later in the day (last_seen moves), and earlier (first_seen moves: the row changes
    # place in the order); one batch by INSERT, the other through the staging table.
    post(
        api,
        [f.record(f.last_seen + timedelta(hours=1), rng.randrange(1, 99)) for f in merged],
        idempotent=True,
    )
    post(api, [f.record(f.first_seen - timedelta(hours=2), 7) for f in merged[::2]])
    assert_one_row_per_flow(api, flows)
    assert segment_rows(api, switch) == packed_before - len(merged)
    # A new 5-tuple on the day, and the moved flows merged into again: still one row each.
    at = DAY + timedelta(hours=1)
    extra = Flow(switch, "10.9.9.9", "10.8.8.8", 1, 2, 6, at, at)
    post(api, [extra.record(extra.first_seen, 5), *(f.record(f.last_seen, 1) for f in merged)])
    flows.append(extra)
    assert segment_rows(api, switch) == packed_before - len(merged)
    assert_one_row_per_flow(api, flows)


def test_a_deleted_flow_of_a_compacted_day_is_gone(api, settings, compacted) -> None:
    switch = compacted["switches"][1]
    flows: list[Flow] = compacted["flows"][switch]
    gone = flows[5]
    body = {
        "switch": switch,
        "from": DAY.date().isoformat(),
        "to": DAY.date().isoformat(),
        "flows": [
            {
                "src_ip": gone.src_ip,
                "dst_ip": gone.dst_ip,
                "src_port": gone.src_port,
                "dst_port": gone.dst_port,
                "proto": gone.proto,
            }
        ],
    }
    response = api.request("DELETE", "/v1/flows", json=body)
    assert response.status_code == 200, response.text
    flows.remove(gone)
    assert_one_row_per_flow(api, flows)


def test_the_admin_api_lists_flow_days_as_the_cli_does(api, settings, compacted) -> None:
    switch = compacted["late"]
    listed = api.get("/v1/admin/compaction", params={"owner": switch, "kind": "flow"})
    assert listed.status_code == 200, listed.text
    days = listed.json()["owner_days"]
    assert days and {(o["kind"], o["owner"], o["state"]) for o in days} == {
        ("flow", switch, "done")
    }
    cli = run_cli(settings, "compact", "--dry-run", "--json", "--owner", switch)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)["owner_days"] == days
    audit_only = api.get("/v1/admin/compaction", params={"owner": switch, "kind": "audit"})
    assert audit_only.json()["owner_days"] == []
    bad = api.get("/v1/admin/compaction", params={"kind": "logs"})
    assert bad.status_code == 422 and "kind" in bad.text, bad.text
    unknown = run_cli(settings, "compact", "--dry-run", "--kind", "flow", "--owner", "no-" + switch)
    assert unknown.returncode == 2 and f"no switch 'no-{switch}'" in unknown.stderr, unknown


# --- the engine's stops and a copy beside merges ------------------------------------------------


def fresh_switch(api: httpx.Client, n: int) -> list[Flow]:
    """A switch of its own with ``n`` flows on the day, written."""
    switch = f"packed-flows-{uuid.uuid4().hex[:8]}"
    flows = flows_of(switch, random.Random(switch))[:n]
    post(api, [flow.record(flow.first_seen, 1000) for flow in flows])
    return flows


def located(api: httpx.Client, switch: str) -> list[tuple[str, DayTable]]:
    ident = owner_id(api, "flow", switch)
    assert ident is not None
    tables = []
    for shard, names in day_tables(api, "flow", ident).items():
        for name in names:
            table = parse_day_table(name)
            assert table is not None
            tables.append((shard, table))
    return tables


def merge_again(api: httpx.Client, flows: list[Flow], size: int) -> None:
    post(api, [flow.record(flow.last_seen, size) for flow in flows[::2]], idempotent=True)


def test_late_merges_at_each_stop_between_steps_keep_each_flow_once(api, settings) -> None:
    """Copied only (the registry still says heap), switched, cleared: late records merged at
    each stop, every flow is one row with its sums, and the next run completes the day."""
    flows = fresh_switch(api, 30)
    switch = flows[0].switch

    async def copy_only() -> None:
        async with context(settings) as ctx:
            compactor = Compactor(ctx.metadata, ctx.pools, settings.compaction)
            for shard, table in located(api, switch):
                await compactor._attempts("copy", shard, table)

    asyncio.run(copy_only())
    merge_again(api, flows, 3)  # moved out of segments no search reads yet
    assert_one_row_per_flow(api, flows)
    assert segment_rows(api, switch) == len(flows) - len(flows[::2])

    switched = run_cli(settings, "compact", "--json", "--kind", "flow", "--owner", switch)
    assert {o["state"] for o in json.loads(switched.stdout)["owner_days"]} == {"wait"}
    assert_one_row_per_flow(api, flows)  # the merged rows from the heap, the others packed
    merge_again(api, flows, 5)
    assert_one_row_per_flow(api, flows)

    compacted_reads.compact(settings, switch, kind="flow")
    assert_one_row_per_flow(api, flows)  # the merged rows stayed in the heap
    merge_again(api, flows[1:], 7)  # the other half now: out of the segments of a cleared day
    assert_one_row_per_flow(api, flows)
    assert segment_rows(api, switch) == 0


def waiting_locks(dsns: dict[str, str], tables: list[tuple[str, DayTable]], mode: str) -> bool:
    """Whether a lock of ``mode`` on one of ``tables`` is waited for."""
    return any(
        shard_sql(
            dsns[shard],
            f"SELECT count(*) FROM pg_locks WHERE NOT granted AND mode = '{mode}' "
            f"AND relation = '{table.quoted}'::regclass",
        ).strip()
        != "0"
        for shard, table in tables
    )


@contextlib.contextmanager
def copy_held(
    settings: Settings, switch: str, tables: list[tuple[str, DayTable]], dsns: dict[str, str]
) -> Iterator[tuple[subprocess.Popen[str], Callable[[], None]]]:
    """`shardlog compact --kind flow --owner switch --clear-now --json` started while a
    transaction on each of ``tables`` holds its copy back, yielded once the copy waits for its
    SHARE lock (inside its transaction, before its snapshot), with what lets the tables go
    (they are let go on the way out anyway)."""
    command = ["compact", "--json", "--kind", "flow", "--owner", switch, "--clear-now"]
    with contextlib.ExitStack() as held:
        for shard, table in tables:
            held.enter_context(
                holding(dsns[shard], f"LOCK TABLE {table.quoted} IN ROW EXCLUSIVE MODE;")
            )
        run = subprocess.Popen(
            [sys.executable, "-m", "router.cli", *command],
            env={**cli_env(settings), "SHARDLOG_COMPACTION__LOCK_TIMEOUT_MS": "60000"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not waiting_locks(dsns, tables, "ShareLock"):
            assert run.poll() is None, run.communicate()
            assert time.monotonic() < deadline, "the copy never asked for its lock"
            time.sleep(0.02)
        yield run, held.close


def test_merges_queued_behind_a_copy_land_after_it_once(api, settings) -> None:
    """A copy waits for a transaction on the flow table (its SHARE lock before its snapshot);
    late records arrive meanwhile and queue behind it; once the copy commits they see the
    compacted day and merge into their flows moved out of the segments: one row each."""
    flows = fresh_switch(api, 20)
    switch = flows[0].switch
    dsns = catalog_shards(api)
    tables = located(api, switch)
    with (
        copy_held(settings, switch, tables, dsns) as (copying, release),
        ThreadPoolExecutor(1) as pool,
    ):
        merging = pool.submit(merge_again, api, flows, 11)
        deadline = time.monotonic() + 60
        while not waiting_locks(dsns, tables, "RowExclusiveLock"):
            assert not merging.done(), "the merge did not wait for the copy"
            assert time.monotonic() < deadline, "the merge never asked for its lock"
            time.sleep(0.02)
        release()  # the copy goes on, then the merges
        merging.result(timeout=60)
    out, err = copying.communicate(timeout=120)
    assert copying.returncode == 0, err
    assert {o["state"] for o in json.loads(out)["owner_days"]} == {"done"}
    assert_one_row_per_flow(api, flows)
    assert segment_rows(api, switch) == len(flows) - len(flows[::2])


def everything(api: httpx.Client, switch: str, day: datetime, **params: str) -> list[dict]:
    window = {"from": day.isoformat(), "to": (day + timedelta(days=1)).isoformat()}
    found = pages(api, {"switch": switch, **window, "limit": 1000, **params}, path=SEARCH)
    return [item for page in found for item in page["items"]]


def test_a_compacted_flow_day_is_read_by_fdw_archived_dropped_and_restored(api, settings) -> None:
    """The fdw backend reads the owner-day's view; `tables sync` keeps the layout; retention
    archives the compacted day through its view and drops it whole (heap, view, segments);
    restore brings the same flows back."""
    switch, group = map_audit_owner(api, "packed-flows-ret", kind="flow")
    day = past_day(6, 0)
    flows = flows_of(switch, random.Random(switch))[:40]
    for flow in flows:
        flow.first_seen = flow.last_seen = flow.first_seen - (DAY - day)
    post(api, [flow.record(flow.first_seen, 300) for flow in flows])
    original = everything(api, switch, day)
    assert len(original) == 40
    compacted_reads.compact(settings, switch, kind="flow")
    assert everything(api, switch, day) == original
    assert everything(api, switch, day, backend="fdw") == everything(api, switch, day)

    ident = owner_id(api, "flow", switch)
    shard_sql(settings.metadata_dsn(), f"DELETE FROM day_tables WHERE owner_id = {ident}")
    synced = run_cli(settings, "tables", "sync")
    assert synced.returncode == 0, synced.stderr
    assert everything(api, switch, day) == original

    policy = {"kind": "flow", "group": group, "owner": switch, "keep_days": 3, "archive": True}
    assert api.put("/v1/admin/retention/policies", json=policy).status_code == 200
    ran = run_cli(
        settings, "retention", "run", "--kind", "flow", "--owner", switch, "--json", "--force"
    )
    assert ran.returncode == 0, ran.stderr
    dropped = [d for d in json.loads(ran.stdout)["drops"] if d["outcome"] == "dropped"]
    assert dropped and sum(d["rows"] for d in dropped) == 40
    table = f"flow_s{ident}_{day:%Y%m%d}"
    for shard, dsn in catalog_shards(api).items():
        left = shard_sql(
            dsn,
            f"SELECT count(*) FROM compacted_days WHERE kind = 'flow' AND owner_id = {ident}; "
            f"SELECT count(*) FROM pg_class WHERE relname IN ('{table}', '{table}_all')",
        ).split()
        assert left == ["0", "0"], (shard, left)
    assert everything(api, switch, day) == []

    restored = run_cli(settings, "restore", switch, day.date().isoformat(), "--kind", "flow")
    assert restored.returncode == 0, restored.stderr
    assert everything(api, switch, day) == original


def test_a_run_killed_while_its_flow_copy_waits_keeps_nothing_and_merges_go_on(
    api, settings
) -> None:
    """kill -9 of `shardlog compact` inside its copy's transaction (waiting for its lock):
    nothing of it stays, late records merge into the heap as on any day, and the next run
    compacts the flows with their sums."""
    flows = fresh_switch(api, 20)
    switch = flows[0].switch
    dsns = catalog_shards(api)
    tables = located(api, switch)
    with copy_held(settings, switch, tables, dsns) as (killed, _):
        killed.kill()
        killed.wait(timeout=10)
        # Its backend would wait on for the lock: ended, as the shard ends a lost session.
        for shard, table in tables:
            shard_sql(
                dsns[shard],
                "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE NOT granted "
                f"AND mode = 'ShareLock' AND relation = '{table.quoted}'::regclass",
            )
        deadline = time.monotonic() + 60
        while waiting_locks(dsns, tables, "ShareLock"):
            assert time.monotonic() < deadline, "the killed copy's backend stayed"
            time.sleep(0.02)
    assert segment_rows(api, switch) == 0
    merge_again(api, flows, 13)
    assert_one_row_per_flow(api, flows)
    rerun = run_cli(
        settings, "compact", "--json", "--kind", "flow", "--owner", switch, "--clear-now"
    )
    assert rerun.returncode == 0, rerun.stderr
    assert {o["state"] for o in json.loads(rerun.stdout)["owner_days"]} == {"done"}
    assert_one_row_per_flow(api, flows)
    assert segment_rows(api, switch) == len(flows)
