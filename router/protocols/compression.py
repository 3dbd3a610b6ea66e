"""Compressed bodies of the log shippers (gzip, and snappy's block format that Loki's protobuf
pushes use), inflated no further than a limit: a small body that would inflate past it (a
"bomb") is refused as soon as that shows, before the memory is spent."""

from __future__ import annotations

import zlib

import cramjam

from router.errors import BadRequest, TooLarge

# Inflated in steps of this much at most: the limit is checked between steps.
_STEP_BYTES = 2**20


def too_large(limit: int) -> TooLarge:
    return TooLarge(f"the body inflates to more than {limit} bytes", "body")


def gunzip(data: bytes, limit: int) -> bytes:
    """The content of a gzip body (one member or several), at most ``limit`` bytes."""
    out = bytearray()
    rest = data
    try:
        while rest:
            inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            pending = rest
            while pending and not inflater.eof:
                out += inflater.decompress(pending, _STEP_BYTES)
                if len(out) > limit:
                    raise too_large(limit)
                pending = inflater.unconsumed_tail
            if not inflater.eof:
                out += inflater.flush()
                if not inflater.eof:
                    raise BadRequest("the gzip body ends before its last member does", "body")
            if len(out) > limit:
                raise too_large(limit)
            rest = inflater.unused_data
    except zlib.error as exc:
        raise BadRequest(f"the body is not valid gzip: {exc}", "body") from None
    return bytes(out)


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
