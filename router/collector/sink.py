"""Decoded flows into the flow write path (router/ingest/service.py), a batch at a time: the
flows of each tenant written as one request of that tenant's grant (the collector may write
flows, nothing else), under an idempotency key of the batch's own, so a retry after a shard
failed mid-commit stores no flow twice. A batch is acknowledged (removed from the queue) only
when it committed; a batch that cannot be written is retried until the queue must drop."""

from __future__ import annotations

import functools
import hashlib
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from typing import Any, NamedTuple

from router import clock
from router.auth.scopes import FLOWS_WRITE, Grant
from router.collector.flows import FlowRecord
from router.db.inet import encode_packed
from router.ingest.records import MAX_BIGINT, FlowRow
from router.ingest.service import IngestService, Request

# The ingest service's keys of requests, ASCII: the collector's own start with this.
KEY_PREFIX = "collector:"


class Exported(NamedTuple):
    """A decoded flow and whose it is: its exporter, the switch the exporter maps to, that
    switch's tenant. One per flow: a tuple (a frozen dataclass is 3x slower to make)."""

    flow: FlowRecord
    exporter: str
    switch: str
    tenant: str


def flow_row(position: int, exported: Exported) -> FlowRow:
    flow = exported.flow
    return FlowRow(
        position,
        exported.switch,
        flow.first_seen,
        encode_packed(flow.src_ip),
        encode_packed(flow.dst_ip),
        flow.src_port,
        flow.dst_port,
        4 if len(flow.src_ip) == 4 else 6,
        flow.proto,
        # Scaled up by a sampling rate, a counter may pass what a bigint holds.
        min(flow.bytes, MAX_BIGINT),
        min(flow.packets, MAX_BIGINT),
        last_seen=flow.last_seen,
        tcp_flags=flow.tcp_flags,
        sampling_rate=flow.sampling_rate,
    )


async def _no_records() -> AsyncIterator[list[tuple[int, Any]]]:
    return
    yield


class Batch:
    """One batch of flows with its idempotency key (the same on every attempt)."""

    def __init__(self, flows: Sequence[Exported]) -> None:
        self.flows = flows
        self.key = f"{KEY_PREFIX}{uuid.uuid4().hex}"
        self.created = clock.now()


async def write_batch(ingest: IngestService, batch: Batch) -> int:
    """The batch's flows written, one request per tenant; the number of flows written."""
    by_tenant: dict[str, list[FlowRow]] = defaultdict(list)
    for exported in batch.flows:
        rows = by_tenant[exported.tenant]
        rows.append(flow_row(len(rows), exported))
    written = 0
    for tenant, rows in sorted(by_tenant.items()):
        key = f"{batch.key}:{hashlib.sha256(tenant.encode()).hexdigest()[:16]}"
        request = Request(
            _no_records(),
            "flows",
            key,
            functools.partial(str, f"{key}:{len(rows)}"),
            Grant(tenant, frozenset({FLOWS_WRITE})),
        )
        result = await ingest.write_flow_rows(request, rows, batch.created)
        written += int(result["accepted"])
    return written
