"""Group commit against the real cluster: small parts bound for one shard at once share one
transaction (one xid in the tail log), each acknowledged after that commit; a part that fails
inside a group takes no other down; a part an earlier attempt committed is skipped inside a
group; a lone part is written by the same statement, and the old path (COPY) stays."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from bench.shard_view import catalog_shards, owner_id, shard_sql
from router import clock
from router.db.inet import encode_address
from router.db.names import day_table
from router.ingest.writer import Part, PartFailed, PartWriter
from router.settings import Settings
from tests.support import in_process_writer

NOW = clock.now().replace(microsecond=0)


@pytest.fixture
async def writer(settings: Settings, api: httpx.Client) -> AsyncIterator[PartWriter]:
    async with in_process_writer(settings) as opened:
        yield opened.writer


def new_owner(api: httpx.Client) -> int:
    """An owner the catalog maps (its first write through the router made it)."""
    key = f"group-{uuid.uuid4().hex[:10]}"
    response = api.post(
        "/v1/audit", json=[{"owner": key, "content": "first", "ts": NOW.isoformat()}]
    )
    assert response.status_code == 200, response.text
    ident = owner_id(api, "audit", key)
    assert ident is not None
    return ident


def audit_part(owner: int, shard: str, number: int, content: str = "row") -> Part:
    table = day_table("audit", owner, NOW.date())
    return Part(f"{table.name}:{number}", table, [(NOW, f"{content} {number}", None)], shard)


def first_shard(api: httpx.Client) -> tuple[str, str]:
    name, dsn = sorted(catalog_shards(api).items())[0]
    return name, dsn


def xids(dsn: str, table: str) -> list[str]:
    """The transaction that wrote each of the test's rows of ``table``."""
    sql = f"SELECT created_xid FROM {table} WHERE content LIKE 'row %' ORDER BY created_xid"
    return shard_sql(dsn, sql).split()


def contents(dsn: str, table: str) -> list[str]:
    """The test's rows of ``table`` (not the owner's first, written through the router)."""
    sql = f"SELECT content FROM {table} WHERE content LIKE 'row %'"
    return sorted(shard_sql(dsn, sql).splitlines())


async def test_concurrent_parts_share_one_commit(writer: PartWriter, api: httpx.Client) -> None:
    owner = new_owner(api)
    shard, dsn = first_shard(api)
    parts = [audit_part(owner, shard, n) for n in range(6)]
    # All six queue before the shard's drain first runs: one group, one commit.
    outcomes = await asyncio.gather(*(writer.write(p, shard, f"k{n}") for n, p in enumerate(parts)))
    assert outcomes == [True] * 6
    table = parts[0].table.name
    assert contents(dsn, table) == sorted(f"row {n}" for n in range(6))
    lines = xids(dsn, table)
    assert len(lines) == 6 and len(set(lines)) == 1


async def test_one_failing_part_takes_no_other_down(writer: PartWriter, api: httpx.Client) -> None:
    owner = new_owner(api)
    shard, dsn = first_shard(api)
    parts = [audit_part(owner, shard, n) for n in range(5)]
    # A NUL character: the server refuses it (validation keeps it out of real requests).
    parts[3] = audit_part(owner, shard, 3, content="bad \x00")
    outcomes = await asyncio.gather(
        *(writer.write(p, shard, f"k{n}") for n, p in enumerate(parts)), return_exceptions=True
    )
    assert [o is True for o in outcomes] == [True, True, True, False, True]
    failed = outcomes[3]
    assert isinstance(failed, PartFailed) and not failed.in_doubt
    assert contents(dsn, parts[0].table.name) == sorted(f"row {n}" for n in (0, 1, 2, 4))


async def test_a_part_committed_before_is_skipped_inside_a_group(
    writer: PartWriter, api: httpx.Client
) -> None:
    owner = new_owner(api)
    shard, dsn = first_shard(api)
    parts = [audit_part(owner, shard, n) for n in range(4)]
    assert await writer.write(parts[2], shard, "retried") is True
    outcomes = await asyncio.gather(
        writer.write(parts[0], shard, "other"),
        *(writer.write(p, shard, "retried") for p in parts[1:]),
    )
    assert outcomes == [True, True, False, True]
    table = parts[0].table.name
    assert contents(dsn, table) == sorted(f"row {n}" for n in range(4))  # "row 2" once


async def test_flow_parts_merge_inside_a_group(writer: PartWriter, api: httpx.Client) -> None:
    switch = f"group-sw-{uuid.uuid4().hex[:8]}"
    flow = {"switch": switch, "src_ip": "10.0.0.1", "dst_ip": "10.0.0.2", "src_port": 1000}
    flow |= {"dst_port": 53, "proto": 17, "bytes": 10, "packets": 1, "ts": NOW.isoformat()}
    # Three requests at once: merged into one row, none lost.
    responses = await asyncio.gather(
        *(asyncio.to_thread(api.post, "/v1/flows", json=[flow]) for _ in range(3))
    )
    assert [r.status_code for r in responses] == [200] * 3
    ident = owner_id(api, "flow", switch)
    table = day_table("flow", ident or 0, NOW.date()).name
    merged = [
        shard_sql(dsn, f"SELECT bytes, packets, flow_count FROM {table}")
        for dsn in catalog_shards(api).values()
        if shard_sql(dsn, f"SELECT to_regclass('{table}') IS NOT NULL").strip() == "t"
    ]
    assert [m.strip() for m in merged if m.strip()] == ["30|3|3"]


def new_switch(api: httpx.Client) -> int:
    """A switch the catalog maps (its first flow through the router made it)."""
    key = f"group-sw-{uuid.uuid4().hex[:8]}"
    flow = {"switch": key, "src_ip": "10.9.9.9", "dst_ip": "10.9.9.8", "src_port": 1}
    assert (
        api.post(
            "/v1/flows", json=[flow | {"dst_port": 2, "proto": 6, "bytes": 1, "packets": 1}]
        ).status_code
        == 200
    )
    switch = owner_id(api, "flow", key)
    assert switch is not None
    return switch


def flow_part(switch: int, shard: str, number: int, port: int) -> Part:
    """One flow (10.0.0.1 -> 10.0.0.2:port, 10 bytes) staged as the service stages it."""
    table = day_table("flow", switch, NOW.date())
    row = (
        encode_address("10.0.0.1"),
        encode_address("10.0.0.2"),
        1000,
        port,
        4,
        17,
        10,
        1,
        1,
        NOW,
        NOW,
        None,
        None,
        False,
    )
    return Part(f"{table.name}@{shard}:{number}", table, [row], shard)


async def test_a_group_of_flow_parts_claims_them_at_once(
    writer: PartWriter, api: httpx.Client
) -> None:
    switch = new_switch(api)
    shard, dsn = first_shard(api)
    # Parts 0 and 2 merge into one row (same 5-tuple); part 1 was committed by an earlier
    # attempt and is skipped inside the group.
    parts = [flow_part(switch, shard, n, port) for n, port in enumerate((53, 80, 53))]
    assert await writer.write(parts[1], shard, "retried") is True
    outcomes = await asyncio.gather(
        writer.write(parts[0], shard, "first"),
        writer.write(parts[1], shard, "retried"),
        writer.write(parts[2], shard, "second"),
    )
    assert outcomes == [True, False, True]
    table = parts[0].table.name
    rows = shard_sql(dsn, f"SELECT dst_port, bytes, flow_count FROM {table} ORDER BY 1")
    assert rows.split() == ["53|20|2", "80|10|1"]
