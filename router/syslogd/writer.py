"""The loop that empties the listener's queue into the database, a batch at a time: its messages
of each sender tenant (router/syslogd/senders.py) as one all-or-nothing write of that tenant's
grant (audit:write alone) under a key of their own: retried under that key while shards are
unavailable (a retry stores nothing twice), the queue filling meanwhile. A batch the write path
refuses as a whole (an owner of another tenant, say) is written again message by message, so one
bad message costs only itself. Each message's ticket is resolved after its commit (True) or
refusal (False)."""

from __future__ import annotations

import asyncio
import uuid

from router.auth.scopes import AUDIT_WRITE, Grant
from router.collector.writer import BatchLoop
from router.errors import ShardlogError, Unavailable
from router.ingest.records import AuditRow
from router.ingest.service import IngestService
from router.protocols import shipped
from router.syslogd.intake import PROTOCOL, SyslogMetrics, Throttled
from router.syslogd.queue import Pending, SyslogQueue

RETRY_PAUSE_S = 1.0


class BatchWriter(BatchLoop[Pending]):
    def __init__(
        self,
        ingest: IngestService,
        queue: SyslogQueue,
        metrics: SyslogMetrics,
        retry_pause_s: float = RETRY_PAUSE_S,
    ) -> None:
        super().__init__(queue, metrics.queued)
        self._ingest = ingest
        self._metrics = metrics
        self._retry_pause_s = retry_pause_s
        self._throttled = Throttled()

    def abandon(self, items: list[Pending]) -> None:
        # Unanswered, a RELP sender sends these again; UDP and TCP lose them.
        for pending in items:
            if pending.ticket is not None:
                pending.ticket.cancel()

    async def write_items(self, batch: list[Pending]) -> None:
        by_tenant: dict[str, list[Pending]] = {}
        for pending in batch:
            by_tenant.setdefault(pending.tenant, []).append(pending)
        for tenant, items in by_tenant.items():
            await self._write_tenant(Grant(tenant, frozenset({AUDIT_WRITE})), items)

    async def _write_tenant(self, grant: Grant, batch: list[Pending]) -> None:
        rows = [pending.row._replace(position=n) for n, pending in enumerate(batch)]
        batch_id = uuid.uuid4().hex
        try:
            await self._commit(grant, rows, batch_id)
            outcomes = [True] * len(rows)
        except ShardlogError as exc:
            self._throttled.warning("batch refused", f"{len(rows)} messages, one by one: {exc}")
            outcomes = [
                await self._one(grant, row, f"{batch_id}:{n}") for n, row in enumerate(rows)
            ]
        accepted = sum(outcomes)
        self._metrics.count("accepted", accepted)
        if accepted < len(rows):
            self._metrics.count("rejected", len(rows) - accepted)
        for pending, ok in zip(batch, outcomes, strict=True):
            if pending.ticket is not None and not pending.ticket.done():
                pending.ticket.set_result(ok)

    async def _one(self, grant: Grant, row: AuditRow, key: str) -> bool:
        try:
            await self._commit(grant, [row._replace(position=0)], key)
        except ShardlogError as exc:
            self._throttled.warning("message refused", f"{grant.tenant} {row.owner}: {exc}")
            return False
        return True

    async def _commit(self, grant: Grant, rows: list[AuditRow], batch_id: str) -> None:
        """Written, retried while shards are unavailable; raises what the write path refuses."""
        key = shipped.body_key(PROTOCOL, grant, batch_id)
        while True:
            try:
                await shipped.write(
                    self._ingest, rows, grant, PROTOCOL, key, f"{batch_id}:{len(rows)}"
                )
                return
            except Unavailable as exc:
                self._throttled.warning("waiting for shards", f"{len(rows)} messages: {exc}")
                await asyncio.sleep(self._retry_pause_s)
