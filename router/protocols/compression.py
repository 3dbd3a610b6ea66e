"""Snappy's block format, which Loki's protobuf pushes use, inflated no further than a limit: the
block's length is read first, so a small body that would inflate past it (a "bomb") is refused
before the memory is spent. (A Content-Encoding, gzip or deflate, is decoded as the body
arrives: router/protocols/encoding.py.)"""

from __future__ import annotations

import cramjam

from router.errors import BadRequest, TooLarge


def too_large(limit: int) -> TooLarge:
    return TooLarge(f"the body inflates to more than {limit} bytes", "body")


def unsnappy(data: bytes, limit: int) -> bytes:
    """The content of a snappy block (the length as a varint, then the compressed data), at
    most ``limit`` bytes: the length is read, and checked, before anything is inflated."""
    length = _varint(data)
    if length > limit:
        raise too_large(limit)
    try:
        return bytes(cramjam.snappy.decompress_raw(data))
    except cramjam.DecompressionError as exc:
        raise BadRequest(f"the body is not a valid snappy block: {exc}", "body") from None


def _varint(data: bytes) -> int:
    value = 0
    for shift, byte in zip(range(0, 35, 7), data, strict=False):
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value
    raise BadRequest("the body does not start with a snappy block's length", "body")
