"""A small gzip or deflate body that arrived at once inflates a megabyte at a time, the event
loop serving others in between (router/protocols/encoding.py): it held the loop ~400 ms for
24 MiB, health checks waiting behind it."""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections.abc import AsyncIterator

import pytest

from router.protocols.encoding import PIECE_BYTES, PIECES_PER_TURN, decoded, decoder

CONTENT = b"y" * (8 * 2**20)


async def _at_once(body: bytes) -> AsyncIterator[bytes]:
    yield body


@pytest.mark.parametrize(
    ("encoding", "compress"), [("gzip", gzip.compress), ("deflate", zlib.compress)]
)
def test_inflating_lets_the_loop_turn_every_megabyte(encoding, compress) -> None:
    async def inflate_beside_a_ticker() -> tuple[bytes, int]:
        ticks = 0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        pieces = [piece async for piece in decoded(_at_once(compress(CONTENT)), decoder(encoding))]
        done.set()
        await task
        return b"".join(pieces), ticks

    content, ticks = asyncio.run(inflate_beside_a_ticker())
    assert content == CONTENT
    turns = len(CONTENT) // (PIECE_BYTES * PIECES_PER_TURN)
    assert ticks >= turns
