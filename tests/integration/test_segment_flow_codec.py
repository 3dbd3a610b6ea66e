"""The flow twins of the segment codec (native/pg_segments/flow.c) on a real shard: flow rows
packed into a block come back unpacked exactly as PostgreSQL's own arrays hold them (every
column of a flow day table, NULLs, IPv4 and IPv6 with netmasks, the limits of each type);
damaged blocks are refused with SQLSTATE XX001 and bad arguments are named."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.cluster import LocalCluster

# (argument, SQL type) in shardlog_pack_flow's order: the columns of a flow day table.
COLUMNS = [
    ("id", "bigint"),
    ("src_ip", "inet"),
    ("dst_ip", "inet"),
    ("src_port", "int"),
    ("dst_port", "int"),
    ("ip_version", "smallint"),
    ("proto", "smallint"),
    ("bytes", "bigint"),
    ("packets", "bigint"),
    ("flow_count", "bigint"),
    ("first_seen", "timestamptz"),
    ("last_seen", "timestamptz"),
    ("created_xid", "xid8"),
    ("merged_xid", "xid8"),
    ("tcp_flags", "smallint"),
    ("sampling_rate", "int"),
    ("sampled", "boolean"),
    ("sampling_mixed", "boolean"),
]
ARRAYS = ", ".join(f"${n}::text[]::{kind}[]" for n, (_, kind) in enumerate(COLUMNS, 1))
NAMES = ", ".join(name for name, _ in COLUMNS)
AS_TEXT = ", ".join(f"{name}::text" for name, _ in COLUMNS)
PACK = f"shardlog_pack_flow({ARRAYS})"
ROUND_TRIP = f"SELECT ord, {AS_TEXT} FROM shardlog_unpack_flow({PACK}) ORDER BY ord"
UNNESTED = (
    f"SELECT ord::int, {AS_TEXT} FROM unnest({ARRAYS}) WITH ORDINALITY AS a ({NAMES}, ord) "
    "ORDER BY ord"
)


@pytest.fixture(scope="module")
async def shard(cluster: LocalCluster) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(cluster.shards[0].spec.dsn())
    await connection.execute("CREATE EXTENSION IF NOT EXISTS shardlog_segments")
    yield connection
    await connection.close()


def integers(bits: int) -> st.SearchStrategy[str]:
    return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1).map(str)


def nullable(values: st.SearchStrategy[str]) -> st.SearchStrategy[str | None]:
    return st.one_of(st.none(), values)


IPV4 = st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 32)).map(
    lambda a: f"{a[0] >> 24}.{a[0] >> 16 & 255}.{a[0] >> 8 & 255}.{a[0] & 255}/{a[1]}"
)
IPV6 = st.tuples(st.integers(0, 2**128 - 1), st.integers(0, 128)).map(
    lambda a: ":".join(f"{a[0] >> (112 - 16 * i) & 0xFFFF:x}" for i in range(8)) + f"/{a[1]}"
)
ADDRESSES = st.one_of(IPV4, IPV6)
INSTANTS = st.one_of(
    st.datetimes().map(lambda moment: moment.isoformat() + "+00"),
    st.sampled_from(
        ["-infinity", "infinity", "4714-11-24 00:00:00+00 BC", "294276-12-31 23:59:59+00"]
    ),
)
XIDS = st.integers(0, 2**64 - 1).map(str)
BOOLEANS = st.booleans().map(str)
ROW = st.tuples(
    integers(64),
    ADDRESSES,
    ADDRESSES,
    integers(32),
    integers(32),
    integers(16),
    nullable(integers(16)),
    integers(64),
    integers(64),
    integers(64),
    INSTANTS,
    INSTANTS,
    nullable(XIDS),
    nullable(XIDS),
    nullable(integers(16)),
    nullable(integers(32)),
    BOOLEANS,
    BOOLEANS,
)


def columns(rows: list[tuple[Any, ...]]) -> list[list[Any]]:
    return [[row[at] for row in rows] for at in range(len(COLUMNS))]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=st.lists(ROW, max_size=30))
async def test_unpack_gives_back_the_flows_packed(
    shard: asyncpg.Connection, rows: list[tuple[Any, ...]]
) -> None:
    arguments = columns(rows)
    unpacked = [tuple(row) for row in await shard.fetch(ROUND_TRIP, *arguments)]
    assert unpacked == [tuple(row) for row in await shard.fetch(UNNESTED, *arguments)]
    assert [row[0] for row in unpacked] == list(range(1, len(rows) + 1))
    assert await shard.fetchval(f"SELECT shardlog_block_rows({PACK})", *arguments) == len(rows)


SOME_FLOWS: list[list[str | None]] = [
    [
        *("7", "10.1.2.3", "2001:db8::1", "53", "5353", "4", "17", "900", "3", "1"),
        *("2026-01-01 00:00:00+00", "2026-01-01 00:00:09+00", "1000", None, "2", "64", "t", "f"),
    ],
    [
        *("8", "10.1.2.4/31", "::", "0", "65535", "6", None, "0", "0", "2"),
        *("2026-01-01 00:00:01+00", "2026-01-01 00:00:01+00", None, "1001", None, None, "f", "t"),
    ],
]


async def test_a_damaged_flow_block_is_refused(shard: asyncpg.Connection) -> None:
    block: bytes = await shard.fetchval(f"SELECT {PACK}", *columns([tuple(r) for r in SOME_FLOWS]))
    unpack = f"SELECT {AS_TEXT} FROM shardlog_unpack_flow($1)"
    original = await shard.fetch(unpack, block)
    assert [row["src_ip"] for row in original] == ["10.1.2.3/32", "10.1.2.4/31"]
    for length in range(len(block)):
        with pytest.raises(asyncpg.DataCorruptedError):
            await shard.fetch(unpack, block[:length])
    for at in range(len(block)):
        flipped = bytearray(block)
        flipped[at] ^= 0x40
        with contextlib.suppress(asyncpg.DataCorruptedError):
            assert await shard.fetch(unpack, bytes(flipped)) == original
    audit: bytes = await shard.fetchval(
        "SELECT shardlog_pack_audit('{1}', '{2026-01-01}', '{x}', '{NULL}', '{NULL}')"
    )
    with pytest.raises(asyncpg.DataCorruptedError, match="not a block of this kind"):
        await shard.fetch(unpack, audit)
    assert await shard.fetchval("SELECT 1") == 1


@pytest.mark.parametrize(("argument", "at"), [("ids", 0), ("dst_ips", 2), ("sampled", 16)])
async def test_a_null_where_a_flow_needs_a_value_is_named(
    shard: asyncpg.Connection, argument: str, at: int
) -> None:
    arguments = columns([tuple(SOME_FLOWS[0])])
    arguments[at] = [None]
    with pytest.raises(asyncpg.NullValueNotAllowedError, match=rf"^{argument}\[1\] is NULL"):
        await shard.fetchval(f"SELECT {PACK}", *arguments)


async def test_arrays_of_different_lengths_are_named(shard: asyncpg.Connection) -> None:
    arguments = columns([tuple(row) for row in SOME_FLOWS])
    arguments[16] = arguments[16][:1]
    with pytest.raises(asyncpg.ArraySubscriptError, match=r"^sampled has 1 elements, ids has 2"):
        await shard.fetchval(f"SELECT {PACK}", *arguments)
