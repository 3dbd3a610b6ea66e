"""Snappy, which Loki's protobuf pushes use: the block format (the content's length as a
varint, then the compressed data) and the framing format (chunks of at most 64 KiB of content,
each with its CRC). Inflated no further than a limit and charged to the in-flight budget as it
grows: a block's declared length is checked and charged before anything is allocated, a framed
body chunk by chunk, so a small body that would inflate past either (a "bomb") is refused
before the memory is spent. (A Content-Encoding, gzip or deflate, is decoded as the body
arrives: router/protocols/encoding.py.)"""

from __future__ import annotations

from collections.abc import Callable

import cramjam

from router.errors import BadRequest, TooLarge

# The framing format's stream identifier chunk, which starts every framed body.
FRAMED_MAGIC = b"\xff\x06\x00\x00sNaPpY"
_COMPRESSED, _UNCOMPRESSED, _PADDING, _STREAM_IDENTIFIER = 0x00, 0x01, 0xFE, 0xFF
# Chunk types 0x02-0x7f are reserved and must not be skipped; 0x80-0xfd may be.
_FIRST_SKIPPABLE = 0x80


def too_large(limit: int) -> TooLarge:
    return TooLarge(f"the body inflates to more than {limit} bytes", "body")


def unsnappy(
    data: bytes | bytearray | memoryview, limit: int, charge: Callable[[int], None]
) -> memoryview:
    """The content of a snappy body (framed when it starts with the stream identifier, else
    one block), at most ``limit`` bytes, each byte passed to ``charge`` (which raises when the
    budget is spent) before it is inflated."""
    view = memoryview(data)
    if view[: len(FRAMED_MAGIC)] == FRAMED_MAGIC:
        return memoryview(_framed(view, limit, charge))
    return _block(view, limit, charge)


def _block(data: memoryview, limit: int, charge: Callable[[int], None]) -> memoryview:
    length = _varint(data)
    if length > limit:
        raise too_large(limit)
    charge(length)
    try:
        # Allocated by the decoder, at the length declared (and charged), without Python's lock.
        content = memoryview(cramjam.snappy.decompress_raw(data))
    except cramjam.DecompressionError as exc:
        raise BadRequest(f"the body is not a valid snappy block: {exc}", "body") from None
    if len(content) != length:
        raise BadRequest("the snappy block is not as long as it declares", "body")
    return content


def _framed(data: memoryview, limit: int, charge: Callable[[int], None]) -> bytearray:
    content = bytearray()
    position = 0
    while position < len(data):
        header = data[position : position + 4]
        kind, size = header[0], int.from_bytes(header[1:], "little")
        end = position + 4 + size
        if len(header) < 4 or end > len(data):
            raise BadRequest("the snappy stream is cut off in a chunk", "body")
        if kind in (_COMPRESSED, _UNCOMPRESSED):
            # One chunk behind the stream identifier is a stream of its own: its CRC is checked,
            # and its content can be no longer than 64 KiB.
            try:
                piece = cramjam.snappy.decompress(FRAMED_MAGIC + data[position:end])
            except cramjam.DecompressionError as exc:
                raise BadRequest(f"the body is not a valid snappy stream: {exc}", "body") from None
            if len(content) + len(piece) > limit:
                raise too_large(limit)
            charge(len(piece))
            content += piece
        elif kind == _STREAM_IDENTIFIER:
            if data[position:end] != FRAMED_MAGIC:
                raise BadRequest("the snappy stream has a bad stream identifier", "body")
        elif kind < _FIRST_SKIPPABLE:
            raise BadRequest(f"the snappy stream has a reserved chunk type {kind}", "body")
        position = end
    return content


def _varint(data: memoryview) -> int:
    value = 0
    for shift, byte in zip(range(0, 35, 7), data, strict=False):
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
    raise BadRequest("the body does not start with a snappy block's length", "body")
