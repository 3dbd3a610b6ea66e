"""The flow twins of the segment codec (native/pg_segments/flow.c) on a real shard: flow rows
packed into a block come back unpacked exactly as PostgreSQL's own arrays hold them (every
column of a flow day table, NULLs, IPv4 and IPv6 with netmasks, the limits of each type);
damaged blocks are refused with SQLSTATE XX001, blocks made in Python from the format's
description unpack to their flows, crafted payloads are read in bounds or refused with XX001,
and bad arguments are named."""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.cluster import LocalCluster
from tests.integration.test_segment_codec import (
    EPOCH,
    crafted_block,
    null_bitmap,
    raw_block,
    varint,
    zigzag_deltas,
)

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


# --- flow blocks made here from the format's description (the top of native/pg_segments/flow.c)

# (is IPv6, netmask length, address)
Address = tuple[bool, int, int]
# id, first_seen and last_seen in microseconds since 2000, src_ip, dst_ip, proto, created_xid
Microflow = tuple[int, int, int, Address, Address, int | None, int | None]
MICROADDRESSES = st.one_of(
    st.tuples(st.just(False), st.integers(0, 32), st.integers(0, 2**32 - 1)),
    st.tuples(st.just(True), st.integers(0, 128), st.integers(0, 2**128 - 1)),
)
MICROFLOWS = st.lists(
    st.tuples(
        st.integers(-(2**63), 2**63 - 1),
        st.integers(-(2**50), 2**50),
        st.integers(-(2**50), 2**50),
        MICROADDRESSES,
        MICROADDRESSES,
        st.one_of(st.none(), st.integers(0, 255)),
        st.one_of(st.none(), st.integers(0, 2**64 - 1)),
    ),
    max_size=20,
)


def plain(values: list[int]) -> bytes:
    return b"".join(zigzag_deltas([value]) for value in values)


def addresses_column(addresses: list[Address]) -> bytes:
    return b"".join(
        [
            null_bitmap([None if v6 else v6 for v6, _, _ in addresses]),
            bytes(bits for _, bits, _ in addresses),
            *(value.to_bytes(16 if v6 else 4, "big") for v6, _, value in addresses),
        ]
    )


def flow_payload(flows: list[Microflow]) -> bytes:
    """Every other column the same in each row: ports 1 and 2, ip_version 4, bytes 3, packets 4,
    flow_count 5, no merged_xid, tcp_flags or sampling_rate, not sampled, not mixed."""
    n = len(flows)
    protos = [flow[5] for flow in flows]
    xids = [flow[6] for flow in flows]
    nothing = [None] * n
    return b"".join(
        [
            varint(n),
            zigzag_deltas([flow[0] for flow in flows]),
            zigzag_deltas([flow[1] for flow in flows]),
            plain([flow[2] - flow[1] for flow in flows]),
            addresses_column([flow[3] for flow in flows]),
            addresses_column([flow[4] for flow in flows]),
            plain([1] * n + [2] * n + [4] * n),
            null_bitmap(protos) + plain([proto for proto in protos if proto is not None]),
            plain([3] * n + [4] * n + [5] * n),
            null_bitmap(xids) + zigzag_deltas([xid for xid in xids if xid is not None]),
            null_bitmap(nothing) * 3,
            null_bitmap([False] * n) * 2,
        ]
    )


def address_of(text: str) -> Address:
    interface = ipaddress.ip_interface(text)
    return (interface.version == 6, interface.network.prefixlen, int(interface.ip))


UNPACKED_FLOWS = """
    SELECT ord, id, first_seen, last_seen, src_ip::text, dst_ip::text, proto,
           created_xid::text, src_port, dst_port, ip_version, bytes, packets, flow_count,
           merged_xid, tcp_flags, sampling_rate, sampled, sampling_mixed
    FROM shardlog_unpack_flow($1)
"""


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(flows=MICROFLOWS)
async def test_a_flow_block_made_by_the_description_unpacks(
    shard: asyncpg.Connection, flows: list[Microflow]
) -> None:
    unpacked = await shard.fetch(UNPACKED_FLOWS, raw_block(len(flows), flow_payload(flows), 2))
    assert [row["ord"] for row in unpacked] == list(range(1, len(flows) + 1))
    assert [
        (
            row["id"],
            row["first_seen"],
            row["last_seen"],
            address_of(row["src_ip"]),
            address_of(row["dst_ip"]),
            row["proto"],
            row["created_xid"],
        )
        for row in unpacked
    ] == [
        (
            id_,
            EPOCH + timedelta(microseconds=first),
            EPOCH + timedelta(microseconds=last),
            src,
            dst,
            proto,
            None if xid is None else str(xid),
        )
        for id_, first, last, src, dst, proto, xid in flows
    ]
    assert {tuple(row)[8:] for row in unpacked} <= {
        (1, 2, 4, 3, 4, 5, None, None, None, False, False)
    }


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(flows=MICROFLOWS, data=st.data())
async def test_a_crafted_flow_payload_is_refused_or_read_in_bounds(
    shard: asyncpg.Connection, flows: list[Microflow], data: st.DataObject
) -> None:
    """Audit's test of crafted payloads (test_segment_codec.py), on flow blocks."""
    with contextlib.suppress(asyncpg.DataCorruptedError):
        await shard.fetch(
            f"SELECT ord, {AS_TEXT} FROM shardlog_unpack_flow($1)",
            crafted_block(flow_payload(flows), len(flows), 2, data),
        )
    assert await shard.fetchval("SELECT 1") == 1
