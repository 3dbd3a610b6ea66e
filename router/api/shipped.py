"""What the log shippers' HTTP routes (Loki push, OTLP logs) share: the body read whole under
the write API's limits and budget (router/api/ingest.py's ``open_body``), inflated when it
came compressed, and decoded messages checked and written as one request whose idempotency
key is the body's own (a shipper's retry of the same body stores nothing twice)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, NamedTuple, TypeVar

from fastapi import Request

from router import clock
from router.api.ingest import open_body
from router.auth.registry import Caller
from router.errors import Invalid, Overloaded
from router.ingest.admit import admit
from router.ingest.body import Body
from router.ingest.records import AuditRow
from router.protocols import compression, encoding, shipped
from router.protocols.allowance import Allowance, Stepping, Steps
from router.runtime import Runtime
from router.settings import IngestSettings

PROTOBUF = "application/x-protobuf"
T = TypeVar("T")


def media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


class Received:
    """A body read whole: ``data`` (inflated once ``unsnappy`` ran) and the digest of the bytes
    as they came. Snappy inflates in a worker thread and messages are decoded in steps, so a
    large body does not hold the event loop (health checks and other requests go on meanwhile);
    what that takes is charged to the in-flight budget with the body (``charge``) and given back
    with it when the ``received`` block ends, after which nothing more is charged (a thread its
    request no longer waits for stops at its next charge)."""

    def __init__(self, body: Body, data: bytearray, settings: IngestSettings) -> None:
        self._body = body
        self._settings = settings
        self._lock = threading.Lock()
        self._closed = False
        self.data: bytes | bytearray | memoryview = data

    @property
    def digest(self) -> str:
        return self._body.digest

    def charge(self, amount: int) -> None:
        with self._lock:
            if self._closed:
                raise Overloaded("the request ended while its body was decoded")
            self._body.charge(amount)

    def close(self) -> None:
        with self._lock:
            self._closed = True

    async def unsnappy(self) -> None:
        """Decompressed from snappy (Loki's protobuf pushes), charged as it inflates."""
        limit = self._settings.max_body_bytes
        self.data = await asyncio.to_thread(compression.unsnappy, self.data, limit, self.charge)

    async def decoded(self, decode: Callable[..., Steps[T]], label: str, *args: Any) -> T:
        """``decode(data, *args, allowance)`` in steps: the messages, the record limits checked
        as it goes (refusals naming the records ``label``), what it makes charged here; between
        two steps the event loop serves others."""
        allowance = Allowance.of(self._settings, self.charge, label)
        stepping = Stepping(decode(self.data, *args, allowance))
        for _ in stepping:
            await asyncio.sleep(0)
        return stepping.value


@asynccontextmanager
async def received(
    request: Request, runtime: Runtime, caller: Caller, protocol: str
) -> AsyncIterator[Received]:
    """The request's body, decoded as it arrives when its Content-Encoding says gzip or
    deflate (the decoded bytes count against the body limit), held against the in-flight
    budget until the block ends."""
    wbits = encoding.decoder(request.headers.get("content-encoding"))
    body = open_body(request, runtime, caller, lambda chunks: encoding.decoded(chunks, wbits))
    whole = None
    try:
        chunks = bytearray()
        async for chunk in body.chunks():
            chunks += chunk
        runtime.metrics.ingest_inflight_bytes.set(runtime.ingest_budget.used)
        runtime.metrics.protocol_bytes.labels(protocol).inc(len(chunks))
        whole = Received(body, chunks, runtime.settings.ingest)
        yield whole
    finally:
        if whole is not None:
            whole.close()
        body.release()
        runtime.metrics.ingest_inflight_bytes.set(runtime.ingest_budget.used)


# Messages checked together: the label that names them in errors (``streams[2].values``), and
# where they came from in the request (the stream, the resource).
Group = tuple[str, int, Sequence[shipped.Message]]


class Outcome(NamedTuple):
    accepted: int
    refused: list[Invalid]
    total: int


async def write(
    runtime: Runtime,
    caller: Caller,
    protocol: str,
    groups: Sequence[Group],
    label: str,
    digest: str,
) -> Outcome:
    """The groups' messages checked one by one and the good ones written: a message that
    breaks the audit rules, or a row past its owner's retention, is that message's refusal
    only, named as it stands in the request (``streams[2].values[7]``); a key the caller may
    not write (403) answers for the whole request, nothing written. The written rows carry
    their group's position, so a refusal while writing (a key another tenant claimed
    meanwhile) names ``label[n]``."""
    limits = runtime.ingest.request_limits()
    now = clock.now()
    rows: list[AuditRow] = []
    refused: list[Invalid] = []
    # Per row, by its number here: its group's label and its place in the group, and the
    # group's position in the request.
    places: list[tuple[str, int, int]] = []
    total = 0
    for group_label, position, messages in groups:
        checked = shipped.check(messages, group_label, limits, now)
        total += len(messages)
        for row in checked.rows:
            places.append((group_label, row.position, position))
            rows.append(row._replace(position=len(places) - 1))
        refused += [error for _, error in checked.refused]
    admitted = await admit(
        runtime.ingest,
        caller.grant,
        rows,
        label,
        lambda n: f"{places[n][0]}[{places[n][1]}]",
        lambda n: f"{label}[{places[n][2]}]",
    )
    for _, refusal in admitted.refused:
        if not isinstance(refusal, Invalid):
            raise refusal
    refused += [refusal for _, refusal in admitted.refused if isinstance(refusal, Invalid)]
    counted = runtime.metrics.protocol_messages
    if refused:
        counted.labels(protocol, "rejected").inc(len(refused))
    written = [row._replace(position=places[row.position][2]) for row in admitted.rows]
    key = shipped.body_key(protocol, caller.grant, digest)
    accepted = await shipped.write(runtime.ingest, written, caller.grant, label, key, digest)
    counted.labels(protocol, "accepted").inc(accepted)
    return Outcome(accepted, refused, total)


def refusals(refused: Sequence[Invalid], most: int = 5) -> str:
    """The first few refusals, for an answer that names them in one text."""
    text = "; ".join(error.message for error in refused[:most])
    if len(refused) > most:
        text += f"; and {len(refused) - most} more"
    return text
