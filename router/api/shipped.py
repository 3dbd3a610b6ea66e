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

from router.api.ingest import open_body
from router.auth.registry import Caller
from router.errors import Invalid, Overloaded
from router.ingest.admit import admit
from router.ingest.body import Body
from router.ingest.records import utc_now
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


async def write(
    runtime: Runtime,
    caller: Caller,
    protocol: str,
    groups: Sequence[Group],
    label: str,
    digest: str,
    all_or_nothing: bool,
) -> Outcome:
    """The groups' messages checked and the good ones written (all or nothing: any refused
    message is raised instead, and none is written; else a row past its owner's retention is
    refused on its own too). Rows carry their group's position, so a refusal while writing (a
    key of another tenant, a day past retention) names ``label[n]``."""
    limits = runtime.ingest.request_limits()
    now = utc_now()
    rows = []
    refused: list[Invalid] = []
    for group_label, position, messages in groups:
        checked = shipped.check(messages, group_label, limits, now)
        rows += [row._replace(position=position) for row in checked.rows]
        refused += [error for _, error in checked.refused]
    counted = runtime.metrics.protocol_messages
    if refused and all_or_nothing:
        counted.labels(protocol, "rejected").inc(len(rows) + len(refused))
        raise refused[0]
    if not all_or_nothing:
        # A row older than its owner's retention is that record's refusal only; a foreign owner
        # (403) or a claim race (429) still answers for the whole request.
        admitted = await admit(
            runtime.ingest, runtime.owners, runtime.catalog, caller.grant, rows, label
        )
        for _, refusal in admitted.refused:
            if not isinstance(refusal, Invalid):
                raise refusal
        refused += [refusal for _, refusal in admitted.refused if isinstance(refusal, Invalid)]
        rows = admitted.rows
    if refused:
        counted.labels(protocol, "rejected").inc(len(refused))
    key = shipped.body_key(protocol, caller.grant, digest)
    accepted = await shipped.write(runtime.ingest, rows, caller.grant, label, key, digest)
    counted.labels(protocol, "accepted").inc(accepted)
    return Outcome(accepted, refused)


def refusals(refused: Sequence[Invalid], most: int = 5) -> str:
    """The first few refusals, for an answer that names them in one text."""
    text = "; ".join(error.message for error in refused[:most])
    if len(refused) > most:
        text += f"; and {len(refused) - most} more"
    return text
