"""Snappy bodies (router/protocols/compression.py), block and framed: inflated no further than
the limit, every byte charged to the budget before it is inflated. Compressed here by cramjam's
own encoders, the framing format also by hand from its specification."""

from __future__ import annotations

import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router.errors import BadRequest, Overloaded, TooLarge
from router.protocols import compression

TEXT = b"".join(b"line %d: user bob logged in from 10.0.0.%d\n" % (i, i % 250) for i in range(9000))


class Budget:
    """A budget of ``limit`` bytes recording each charge, refusing as the router's does."""

    def __init__(self, limit: int = 2**40) -> None:
        self.limit = limit
        self.charges: list[int] = []

    def __call__(self, amount: int) -> None:
        if sum(self.charges) + amount > self.limit:
            raise Overloaded("the router holds as many request bytes as it may")
        self.charges.append(amount)


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def chunk(kind: int, payload: bytes) -> bytes:
    return bytes([kind]) + len(payload).to_bytes(3, "little") + payload


def uncompressed_chunk(data: bytes) -> bytes:
    """The framing format's chunk of type 1: the masked CRC-32C, then the data as it is."""
    crc = crc32c(data)
    masked = (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    return chunk(0x01, struct.pack("<I", masked) + data)


def test_a_block_is_charged_its_declared_length_before_it_is_inflated() -> None:
    block = bytes(cramjam.snappy.compress_raw(TEXT))
    budget = Budget()
    assert compression.unsnappy(block, len(TEXT), budget) == TEXT
    assert budget.charges == [len(TEXT)]
    # A block that declares 200 MB and holds ten bytes: the budget refuses before anything is
    # allocated (inflating first would have found the block broken, a 400).
    promise = b"\x80\xb4\x89\x5f" + b"\x00" * 10
    with pytest.raises(Overloaded):
        compression.unsnappy(promise, 256 * 2**20, Budget(limit=2**20))
    with pytest.raises(BadRequest):
        compression.unsnappy(promise, 256 * 2**20, Budget())


def test_a_block_past_the_limit_is_refused_unread_and_uncharged() -> None:
    block = bytes(cramjam.snappy.compress_raw(TEXT))
    budget = Budget()
    with pytest.raises(TooLarge, match=f"more than {len(TEXT) - 1} bytes"):
        compression.unsnappy(block, len(TEXT) - 1, budget)
    assert budget.charges == []


def test_a_framed_body_is_inflated_and_charged_chunk_by_chunk() -> None:
    framed = bytes(cramjam.snappy.compress(TEXT))
    assert framed.startswith(compression.FRAMED_MAGIC)
    budget = Budget()
    assert compression.unsnappy(framed, len(TEXT), budget) == TEXT
    assert sum(budget.charges) == len(TEXT)
    assert max(budget.charges) <= 65536 and len(budget.charges) == -(-len(TEXT) // 65536)
    # Past the limit: refused at the chunk that passes it, never charged beyond it.
    budget = Budget()
    with pytest.raises(TooLarge):
        compression.unsnappy(framed, 100_000, budget)
    assert sum(budget.charges) <= 100_000
    # The budget spent halfway: 429, with no more than the budget charged.
    budget = Budget(limit=150_000)
    with pytest.raises(Overloaded):
        compression.unsnappy(framed, len(TEXT), budget)
    assert sum(budget.charges) <= 150_000


def test_the_framing_format_by_hand() -> None:
    """Chunks made here from the specification: uncompressed, padding and skippable chunks,
    a second stream identifier (concatenated streams)."""
    first, second = b"first chunk; ", b"second chunk"
    stream = (
        compression.FRAMED_MAGIC
        + uncompressed_chunk(first)
        + chunk(0xFE, b"\x00" * 7)
        + chunk(0x80, b"skip me")
        + compression.FRAMED_MAGIC
        + uncompressed_chunk(second)
    )
    budget = Budget()
    assert compression.unsnappy(stream, 100, budget) == first + second
    assert budget.charges == [len(first), len(second)]
    bad_crc = bytearray(uncompressed_chunk(first))
    bad_crc[-1] ^= 1
    refused = [
        compression.FRAMED_MAGIC + bytes(bad_crc),
        compression.FRAMED_MAGIC + chunk(0x02, b"reserved"),
        compression.FRAMED_MAGIC + uncompressed_chunk(first)[:-3],
        compression.FRAMED_MAGIC + chunk(0xFF, b"sNaPpZ"),
        # A compressed chunk whose block declares more than the 64 KiB a chunk may hold.
        compression.FRAMED_MAGIC
        + chunk(0x00, b"\x00" * 4 + bytes(cramjam.snappy.compress_raw(b"a" * 70_000))),
    ]
    for body in refused:
        with pytest.raises(BadRequest):
            compression.unsnappy(body, 10**6, Budget())


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.booleans())
def test_any_bytes_inflate_within_the_limit_or_are_refused(data: bytes, framed: bool) -> None:
    body = compression.FRAMED_MAGIC + data if framed else data
    budget = Budget()
    try:
        content = compression.unsnappy(body, 5000, budget)
    except (BadRequest, TooLarge):
        return
    assert len(content) <= 5000 and sum(budget.charges) == len(content)
