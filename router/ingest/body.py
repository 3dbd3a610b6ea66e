"""Request bodies as streams of records: JSON arrays, NDJSON (parsed line by line as it
arrives) and flow CSV. Bytes are counted against the body limit and the router-wide in-flight
budget as they arrive, and hashed for Idempotency-Key checks."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import threading
from collections.abc import AsyncIterator
from typing import Any

import orjson

from router.errors import BadRequest, Invalid, Overloaded, TooLarge
from router.ingest.json_array import ArrayError, ElementTooLong
from router.ingest.json_array import elements as json_array_elements


class ByteBudget:
    """Bytes of request bodies the router holds at once, across all requests (and the worker
    threads that decode them: hence the lock)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()

    def take(self, amount: int) -> bool:
        with self._lock:
            if self.used + amount > self.limit:
                return False
            self.used += amount
            return True

    def give_back(self, amount: int) -> None:
        with self._lock:
            self.used -= amount


class Body:
    """One request's byte stream with its size limit, budget charge and hash."""

    def __init__(
        self,
        chunks: AsyncIterator[bytes],
        max_bytes: int,
        budget: ByteBudget,
        retry_after_s: int,
        hashed: bool = True,
    ) -> None:
        self._chunks = chunks
        self._max_bytes = max_bytes
        self._budget = budget
        self._retry_after_s = retry_after_s
        self.size = 0
        self.charged = 0
        # Only a body whose digest is asked for pays for hashing it (REST writes: keyed ones).
        self._hash = hashlib.sha256() if hashed else None

    @property
    def digest(self) -> str:
        if self._hash is None:
            raise RuntimeError("this body was read without hashing it")
        return self._hash.hexdigest()

    def charge(self, amount: int) -> None:
        if not self._budget.take(amount):
            raise Overloaded(
                "the router holds as many request bytes as it may; retry shortly",
                retry_after_s=self._retry_after_s,
            )
        self.charged += amount

    def release(self) -> None:
        self._budget.give_back(self.charged)
        self.charged = 0

    async def chunks(self) -> AsyncIterator[bytes]:
        async for chunk in self._chunks:
            if not chunk:
                continue
            self.size += len(chunk)
            if self.size > self._max_bytes:
                raise TooLarge(f"request body is larger than {self._max_bytes} bytes", "body")
            self.charge(len(chunk))
            if self._hash is not None:
                self._hash.update(chunk)
            yield chunk


# Parsers yield records in lists (one per arriving chunk or array slice): an async generator
# step per record costs more than parsing it.
Batch = list[tuple[int, Any]]
# Bytes of a JSON array parsed (and then checked) at once: a few milliseconds of the event loop.
ARRAY_SLICE_BYTES = 2**17


class LineTooLong(Exception):
    """A line passed the longest a record may be; raised before its end has arrived."""


async def json_array(body: Body, max_record_bytes: int) -> AsyncIterator[Batch]:
    # Grown as chunks arrive (realloc moves no bytes): one join at the end would touch every
    # page of a large body at once and hold the event loop for it.
    data = bytearray()
    async for chunk in body.chunks():
        data += chunk
    index = 0
    try:
        for items in json_array_elements(data, ARRAY_SLICE_BYTES, max_record_bytes):
            yield list(enumerate(items, index))
            index += len(items)
            # Let health checks and small requests in between two slices of a large body.
            await asyncio.sleep(0)
    except ArrayError as exc:
        where = "" if exc.position is None else f" (near byte {exc.position})"
        if str(exc).startswith("body must be"):
            raise Invalid(str(exc), "body") from None
        raise BadRequest(f"{exc}{where}", "body") from None
    except ElementTooLong as exc:
        raise too_long("records", exc.index, max_record_bytes) from None


def too_long(label: str, number: int, max_record_bytes: int) -> TooLarge:
    return TooLarge(
        f"{label}[{number}] is longer than {max_record_bytes} bytes, more than any valid "
        "record can take",
        f"{label}[{number}]",
    )


async def line_blocks(body: Body, max_line_bytes: int) -> AsyncIterator[bytes]:
    """The complete lines that arrived, as one block per chunk: the lines joined by LF, without
    the last LF. A line is refused (LineTooLong) as soon as ``max_line_bytes`` of it arrived,
    after a block of the complete lines before it. Each byte is looked at once or twice: never
    again for every chunk of a long line."""
    pending: list[bytes] = []
    pending_bytes = 0
    async for chunk in body.chunks():
        last = chunk.rfind(b"\n")
        if last < 0:
            pending.append(chunk)
            pending_bytes += len(chunk)
            if pending_bytes > max_line_bytes:
                raise LineTooLong
            continue
        pending.append(chunk[:last])
        block = b"".join(pending)
        if len(block) > max_line_bytes:
            complete = block.split(b"\n")
            if max(map(len, complete)) > max_line_bytes:
                fitting = list(
                    itertools.takewhile(lambda line: len(line) <= max_line_bytes, complete)
                )
                if fitting:
                    yield b"\n".join(fitting)
                raise LineTooLong
        tail = chunk[last + 1 :]
        pending, pending_bytes = [tail], len(tail)
        if pending_bytes > max_line_bytes:
            raise LineTooLong
        yield block
    if pending_bytes:
        yield b"".join(pending)


async def lines(body: Body, max_line_bytes: int) -> AsyncIterator[list[bytes]]:
    """Complete lines as they arrive, without their LF (see line_blocks)."""
    async for block in line_blocks(body, max_line_bytes):
        yield block.split(b"\n")


class LineBlock:
    """Complete NDJSON lines joined by LF, not yet decoded: whoever takes the records decodes a
    block at once (router/ingest/typed.py) or line by line (``records``). Records are numbered
    by the reader, who counts them across blocks: a blank line is not a record."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def records(self, first: int) -> Batch:
        """The block's records decoded one line at a time, numbered from ``first``."""
        batch: Batch = []
        loads, decode_error = orjson.loads, orjson.JSONDecodeError
        index = first
        for line in self.data.split(b"\n"):
            if not line.strip():
                continue
            try:
                batch.append((index, loads(line)))
            except decode_error as exc:
                raise BadRequest(
                    f"records[{index}] is not valid JSON: {exc.msg}", f"records[{index}]"
                ) from None
            index += 1
        return batch


async def ndjson_blocks(body: Body, max_record_bytes: int) -> AsyncIterator[LineBlock]:
    """Blocks of NDJSON lines as they arrive, for a reader that numbers the records itself. A
    line longer than ``max_record_bytes`` raises LineTooLong: the reader names it
    (``too_long``)."""
    async for block in line_blocks(body, max_record_bytes):
        yield LineBlock(block)


async def ndjson(body: Body, max_record_bytes: int) -> AsyncIterator[Batch]:
    """NDJSON records decoded line by line as they arrive, numbered."""
    index = 0
    try:
        async for block in line_blocks(body, max_record_bytes):
            batch = LineBlock(block).records(index)
            index += len(batch)
            yield batch
    except LineTooLong:
        raise too_long("records", index, max_record_bytes) from None
