"""The native flow decoder (native/src/flow_rows.rs) against the per-line path it must equal:
it takes a block only when orjson + records.flow_row take every line of it, makes the same rows
(addresses in the same binary inet, the same integers and Nones), and takes every block of the
common shape."""

import ipaddress
import json
from typing import Any

import orjson
import pytest
import shardlog_native
from hypothesis import given, settings
from hypothesis import strategies as st

from router.ingest import typed
from router.ingest.records import MAX_BIGINT, MAX_INTEGER, FlowRow, flow_row
from tests.support import per_line_rows
from tests.unit.native_decoding import (
    DEFAULT_TS,
    EXAMPLES,
    NOW,
    hostile_blocks,
    limits,
    taken_as_per_line,
)


def both_ways(block_lines: list[bytes], first: int) -> tuple[Any, list[FlowRow] | None]:
    """The native rows of the lines as one block, and the per-line path's."""
    block = b"\n".join(block_lines)
    given_limits = limits()
    fast = shardlog_native.flow_rows(
        block,
        first,
        DEFAULT_TS,
        typed._latest_micros(NOW, given_limits),
        FlowRow,
        lambda key: typed._valid_key(key, given_limits),
    )
    return fast, per_line_rows(flow_row, block, first, NOW, limits())


V4 = st.ip_addresses(v=4).map(str)
V6 = st.ip_addresses(v=6).flatmap(
    lambda address: st.sampled_from(
        [str(address), address.exploded, str(address).upper(), address.exploded.upper()]
    )
)
ODD_ADDRESSES = st.sampled_from(
    [
        " 10.0.0.1",
        "10.0.0.1 ",
        "10.0.0.256",
        "010.0.0.1",
        "1.2.3",
        "fe80::1%eth0",
        "::ffff:1.2.3.4",
        "::1.2.3.4",
        "1::2::3",
        "",
        "g::1",
        "10.0.0.1/32",
        "\u0661\u0660.0.0.1",
    ]
)
ADDRESSES = st.one_of(V4, V6, ODD_ADDRESSES)
EDGES = [0, 1, 255, 256, 65535, 65536, MAX_INTEGER, MAX_INTEGER + 1, MAX_BIGINT, MAX_BIGINT + 1]
INTEGERS = st.one_of(st.sampled_from(EDGES), st.integers(0, 70000))
VALUES = st.one_of(
    INTEGERS,
    st.integers(-3, -1),
    st.sampled_from([None, True, 1.0, 1.5, "80", 2**64]),
)


@st.composite
def ordinary_flows(draw: st.DrawFn) -> dict[str, Any]:
    """The common shape: a valid key, two addresses of one family, integers in range."""
    v6 = draw(st.booleans())
    address = V6 if v6 else V4
    flow: dict[str, Any] = {
        "switch": draw(st.sampled_from(["sw1", "sw-2", "émile"])),
        "src_ip": draw(address),
        "dst_ip": draw(address),
        "src_port": draw(st.integers(0, 65535)),
        "dst_port": draw(st.integers(0, 65535)),
        "bytes": draw(st.integers(0, MAX_BIGINT)),
    }
    optional = {
        "ts": st.sampled_from(["2026-11-25T10:00:00Z", "2026-11-25T10:00:00.5+01:00", None]),
        "ip_version": st.sampled_from([6 if v6 else 4, None]),
        "proto": st.one_of(st.none(), st.integers(0, 255)),
        "packets": st.integers(0, MAX_BIGINT),
        "tcp_flags": st.one_of(st.none(), st.integers(0, 255)),
        "sampling_rate": st.one_of(st.none(), st.integers(1, MAX_INTEGER)),
    }
    for name, values in optional.items():
        if draw(st.booleans()):
            flow[name] = draw(values)
    return dict(draw(st.permutations(list(flow.items()))))


FIELDS = ["switch", "src_ip", "dst_ip", "src_port", "dst_port", "bytes", "ts", "ip_version"]
FIELDS += ["proto", "packets", "tcp_flags", "sampling_rate", "owner"]


@st.composite
def flows(draw: st.DrawFn) -> dict[str, Any]:
    """An ordinary flow with up to two fields made odd: another value, or left out."""
    flow = draw(ordinary_flows())
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=2)):
        if name in flow and draw(st.integers(0, 4)) == 0:
            del flow[name]
        elif name == "switch":
            flow[name] = draw(st.text(max_size=14))
        elif name in ("src_ip", "dst_ip"):
            flow[name] = draw(ADDRESSES)
        else:
            flow[name] = draw(VALUES)
    return flow


def same_flows(got: list[FlowRow], expected: list[FlowRow]) -> None:
    assert got == expected
    assert all(type(row) is FlowRow for row in got)


def encoded(flow: dict[str, Any]) -> bytes:
    """The stdlib's JSON: orjson writes no integer past 64 bits."""
    return json.dumps(flow, ensure_ascii=False).encode()


@pytest.mark.slow
@settings(max_examples=EXAMPLES)
@given(st.lists(flows().map(encoded), min_size=1, max_size=4), st.integers(0, 10))
def test_the_native_decoder_makes_the_per_line_rows_or_hands_back(
    block_lines: list[bytes], first: int
) -> None:
    fast, expected = both_ways(block_lines, first)
    taken_as_per_line(fast, expected, block_lines, same_flows)


@settings(max_examples=1000)
@given(st.lists(ordinary_flows().map(orjson.dumps), min_size=1, max_size=4))
def test_the_native_decoder_takes_every_ordinary_block(block_lines: list[bytes]) -> None:
    fast, expected = both_ways(block_lines, 3)
    assert expected is not None
    assert fast is not None, block_lines
    assert fast == expected


def test_addresses_are_binary_inet() -> None:
    line = orjson.dumps(
        {
            "switch": "sw1",
            "src_ip": "2001:DB8::1",
            "dst_ip": "::ffff:10.0.0.1",
            "src_port": 1,
            "dst_port": 2,
            "bytes": 3,
        }
    )
    fast, _ = both_ways([line], 0)
    assert fast is not None
    row = fast[0]
    assert row.src_ip == b"\x03\x80\x00\x10" + ipaddress.ip_address("2001:db8::1").packed
    assert row.dst_ip[-4:] == bytes([10, 0, 0, 1])
    assert (row.ip_version, row.packets, row.proto, row.ts) == (6, 0, None, DEFAULT_TS)


@pytest.mark.slow
@settings(max_examples=EXAMPLES)
@given(hostile_blocks(ordinary_flows().map(orjson.dumps)))
def test_hostile_bytes_are_rows_or_handed_back(block_lines: list[bytes]) -> None:
    """Any bytes at all (lines of valid flows with a byte or three changed, or noise): rows
    equal to the per-line path's, or None; never an exception (a Rust panic would be one)."""
    fast, expected = both_ways(block_lines, 0)
    taken_as_per_line(fast, expected, block_lines, same_flows)
