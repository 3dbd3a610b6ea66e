"""Bounds-checked reading of the wire format shared by NetFlow v9 and IPFIX."""

from __future__ import annotations

from collections.abc import Sequence

from router.collector.elements import VARIABLE_LENGTH
from router.collector.templates import Field


class Malformed(ValueError):
    """A message that does not parse; its text is the short reason reported with it."""


def read_fields(
    data: bytes, offset: int, end: int, fields: Sequence[Field]
) -> tuple[list[bytes], int]:
    """Each field's octets of the record at offset, and the offset after it.

    A variable-length field's octets come after its length: one octet, or 255 and two more
    (RFC 7011 §7)."""
    values = []
    for field in fields:
        length = field.length
        if length == VARIABLE_LENGTH:
            if offset >= end:
                raise Malformed("record beyond set")
            length = data[offset]
            offset += 1
            if length == 255:
                if offset + 2 > end:
                    raise Malformed("record beyond set")
                length = int.from_bytes(data[offset : offset + 2])
                offset += 2
        if offset + length > end:
            raise Malformed("record beyond set")
        values.append(data[offset : offset + length])
        offset += length
    return values, offset
