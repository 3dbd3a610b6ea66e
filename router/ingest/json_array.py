"""The elements of a JSON array body, a slice at a time.

One ``orjson.loads`` of a 200 MiB array holds the event loop for over a second. Here the array
is cut into slices of about ``slice_bytes`` at places that look like the gap between two
records (``}`` ``,`` ``{``), and each slice is parsed as an array of its own. A cut that falls
inside a string or a nested value cannot parse (the slice ends inside it), so a slice that
parses ends between two top-level elements: the cut only speeds things up, it never changes
the result. When no cut parses after a few tries (strings full of ``},{``, or elements that are
not objects), the rest is read element by element by the standard library's decoder, still in
slices. Work stays linear in the body either way.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from typing import Any

import orjson

_GAP = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
_SPACE = b" \t\r\n"
_LEADING_SPACE = re.compile(rb"[ \t\r\n]*")
TRIES_PER_SLICE = 4


class ArrayError(ValueError):
    """The body is not a JSON array; ``position`` is a byte offset when it is known."""

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.position = position


class ElementTooLong(ValueError):
    def __init__(self, index: int) -> None:
        super().__init__(f"element {index} is too long")
        self.index = index


def elements(
    data: bytes | bytearray, slice_bytes: int, max_element_bytes: int
) -> Iterator[list[Any]]:
    """Lists of consecutive elements of the array ``data``; ArrayError when it is not one."""
    start, end = _LEADING_SPACE.match(data).end(), len(data)  # type: ignore[union-attr]
    while end > start and data[end - 1] in _SPACE:
        end -= 1
    if start == end or data[start : start + 1] != b"[" or data[end - 1 : end] != b"]":
        yield _whole(data)
        return
    position, inner_end, index = start + 1, end - 1, 0
    while True:
        if inner_end - position <= 2 * slice_bytes:
            yield _parse_slice(data, position, inner_end)
            return
        cut = _cut(data, position, inner_end, slice_bytes, max_element_bytes)
        if cut is None:
            yield from _one_by_one(data, position, inner_end, index, slice_bytes, max_element_bytes)
            return
        items, position = cut
        index += len(items)
        yield items


def _whole(data: bytes | bytearray) -> list[Any]:
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ArrayError(f"body is not valid JSON: {exc.msg}", exc.pos) from None
    if not isinstance(value, list):
        raise ArrayError("body must be a JSON array of records")
    return value


def _parse_slice(data: bytes | bytearray, start: int, stop: int) -> list[Any]:
    try:
        items: list[Any] = orjson.loads(b"[" + data[start:stop] + b"]")
    except orjson.JSONDecodeError as exc:
        raise ArrayError(f"body is not valid JSON: {exc.msg}", start + exc.pos - 1) from None
    return items


def _cut(
    data: bytes | bytearray, position: int, inner_end: int, slice_bytes: int, max_element_bytes: int
) -> tuple[list[Any], int] | None:
    """The elements of one slice from ``position`` and where the next one starts, or None when
    no place to cut was found."""
    search_from = position + slice_bytes
    search_to = min(inner_end, search_from + max_element_bytes)
    for _ in range(TRIES_PER_SLICE):
        gap = _GAP.search(data, search_from, search_to)
        if gap is None:
            return None
        try:
            items: list[Any] = orjson.loads(b"[" + data[position : gap.start() + 1] + b"]")
        except orjson.JSONDecodeError:
            search_from = gap.start() + 1
            continue
        return items, gap.end() - 1
    return None


def _one_by_one(
    data: bytes | bytearray,
    position: int,
    inner_end: int,
    index: int,
    slice_bytes: int,
    max_bytes: int,
) -> Iterator[list[Any]]:
    """The exact path: one element at a time (standard library), text decoded as it goes. The
    text always holds ``max_bytes`` characters past ``offset`` (or all the rest), so an element
    that does not decode from it is too long or broken."""
    decoder = json.JSONDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")()
    text, offset, fed = "", 0, position
    expect_element = True
    batch: list[Any] = []
    while True:
        while fed < inner_end and len(text) - offset < max_bytes:
            step = min(inner_end, fed + max(slice_bytes, max_bytes))
            try:
                text = text[offset:] + utf8.decode(data[fed:step], final=step == inner_end)
            except UnicodeDecodeError as exc:
                raise ArrayError("body is not UTF-8", fed + exc.start) from None
            offset, fed = 0, step
        offset = _skip_space(text, offset)
        at_end = offset == len(text) and fed == inner_end
        if not expect_element:
            if at_end:
                yield batch
                return
            if text[offset] != ",":
                raise ArrayError(f"body is not valid JSON: expected ',' after element {index - 1}")
            offset += 1
            expect_element = True
            continue
        if at_end:
            raise ArrayError(f"body is not valid JSON: expected element {index} after ','")
        try:
            value, offset = decoder.raw_decode(text, offset)
        except json.JSONDecodeError as exc:
            if len(text) - offset >= max_bytes:
                raise ElementTooLong(index) from None
            raise ArrayError(f"body is not valid JSON: {exc.msg} in element {index}") from None
        batch.append(value)
        index += 1
        expect_element = False
        if len(batch) >= 1000:
            yield batch
            batch = []


def _skip_space(text: str, offset: int) -> int:
    while offset < len(text) and text[offset] in " \t\r\n":
        offset += 1
    return offset
