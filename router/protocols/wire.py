"""Protocol Buffers' wire format read one level at a time, without building messages: the
protobuf decoders (Loki, OTLP) find each record's bytes here and count and measure them before
the record itself is parsed, so a request too large for the limits is refused before it costs
memory. Pure."""

from __future__ import annotations

from collections.abc import Iterator

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
_FIXED = {FIXED64: 8, FIXED32: 4}


class WireError(ValueError):
    """The bytes are not protobuf's wire format."""


def varint(data: memoryview, position: int) -> tuple[int, int]:
    """The varint at ``position``, and the position after it."""
    end = len(data)
    if position < end and data[position] < 0x80:  # most keys and short lengths
        return data[position], position + 1
    value = shift = 0
    while True:
        if position >= end:
            raise WireError("a varint is cut off")
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7
        if shift >= 70:
            raise WireError("a varint is longer than 10 bytes")


def fields(data: memoryview, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """Each field of the message in ``data[start:end]``: its number, wire type, and where its
    value starts and ends (for a length-delimited field, its payload). Groups, which none of
    the messages read here has, are refused."""
    position = start
    while position < end:
        key, position = varint(data, position)
        number, kind = key >> 3, key & 7
        if number == 0:
            raise WireError("a field has number 0")
        if kind == VARINT:
            _, after = varint(data, position)
        elif kind == LENGTH:
            length, position = varint(data, position)
            after = position + length
        elif kind in _FIXED:
            after = position + _FIXED[kind]
        else:
            raise WireError(f"a field has wire type {kind}")
        if after > end:
            raise WireError(f"field {number} runs past the end of its message")
        yield number, kind, position, after
        position = after


def split(data: memoryview, start: int, end: int, wanted: int) -> tuple[list[range], list[range]]:
    """Where the fields of the message in ``data[start:end]`` lie: the other fields whole (tag
    and value, to be ``join``ed into a message of their own), and the values of field
    ``wanted`` (a repeated message field)."""
    others: list[range] = []
    found: list[range] = []
    field_start = start
    for number, kind, value_start, value_end in fields(data, start, end):
        if number == wanted:
            if kind != LENGTH:
                raise WireError(f"field {number} is not length-delimited")
            found.append(range(value_start, value_end))
        else:
            others.append(range(field_start, value_end))
        field_start = value_end
    return others, found


def join(data: memoryview, parts: list[range]) -> bytes:
    return b"".join(data[part.start : part.stop] for part in parts)
