"""The platform audits itself: every admin action, and every token use that deletes data, is
written as an audit row of the owner ``shardlog.admin`` (tenant ``system``) through the same
ingest service as any other row, so it is searched, exported and retained like any other owner
(its own retention policy: SHARDLOG_AUTH__AUDIT_KEEP_DAYS, set on its first row unless an
admin set one).

A row says what was done, to what, by whom (the token's id and name, or the CLI's user, never
a secret), e.g. ``token.revoke 3f2a9c0d1e2b4f60 by token 0b1c… (ops, tenant system)`` with
``attrs`` ``{"action", "actor", "token_id", "target", ...}``. The action has happened when its
row is written; a row that cannot be written is logged as a warning and counted
(``shardlog_self_audit_failures_total``), never turned into the action's failure."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg

from router.auth.scopes import AUDIT_WRITE, SYSTEM_TENANT, Grant
from router.catalog.cache import CatalogCache
from router.catalog.owners import OwnerDirectory
from router.db import catalog_login, pools
from router.db.failures import DRIVER_ERRORS, describe
from router.db.shard_health import ShardHealth
from router.errors import ShardlogError, excerpt
from router.ingest.idempotency import IdempotencyStore
from router.ingest.service import IngestService
from router.ingest.service import Request as WriteRequest
from router.ingest.writer import PartWriter
from router.metrics import Metrics
from router.retention import policies
from router.retention.runner import RunReport
from router.settings import Settings

log = logging.getLogger(__name__)

SYSTEM_OWNER = "shardlog.admin"
# What the self-audit may do: write its own owner, of its own tenant. Not the platform's
# every-tenant grant: a `shardlog.admin` of another tenant is refused, not written into.
GRANT = Grant(SYSTEM_TENANT, frozenset({AUDIT_WRITE}))
MAX_DETAIL_CHARS = 200


class SelfAudit:
    def __init__(
        self,
        ingest: IngestService,
        catalog: CatalogCache,
        metadata: asyncpg.Pool,
        metrics: Metrics,
        keep_days: int,
    ) -> None:
        self._ingest = ingest
        self._catalog = catalog
        self._metadata = metadata
        self._metrics = metrics
        self._keep_days = keep_days
        self._policy_checked = False

    async def record(self, actor: str, action: str, target: str, **details: Any) -> bool:
        """Write one row: ``action`` (dotted, e.g. ``tenant.add``) on ``target`` by ``actor``,
        with JSON ``details``. True when it was written."""
        attrs = {
            "action": action,
            "actor": actor,
            "target": target,
            **{k: _shown(v) for k, v in details.items() if v is not None},
        }
        content = f"{action} {target} by {actor}"
        records = [{"owner": SYSTEM_OWNER, "content": content, "attrs": attrs}]
        try:
            await self._ingest.write_audit(
                WriteRequest(_batches(records), "records", None, lambda: "", GRANT, platform=True)
            )
            await self._ensure_policy()
        except (ShardlogError, *DRIVER_ERRORS) as exc:
            self._metrics.self_audit_failures.inc()
            reason = exc.message if isinstance(exc, ShardlogError) else describe(exc)
            log.warning("self-audit row not written (%s): %s", content, reason)
            return False
        return True

    async def _ensure_policy(self) -> None:
        """The system owner's own retention policy, unless it has one."""
        if self._policy_checked:
            return
        mapping = await self._ingest_owner()
        if mapping is not None:
            snapshot = self._catalog.snapshot
            own = snapshot.policy_for("audit", mapping[1], SYSTEM_OWNER)
            if own is None or own.owner_key != SYSTEM_OWNER:
                await policies.set_policy(
                    self._metadata, "audit", mapping[1], SYSTEM_OWNER, self._keep_days, False
                )
        self._policy_checked = True

    async def _ingest_owner(self) -> tuple[str, str] | None:
        row = await self._metadata.fetchrow(
            "SELECT tenant, group_name FROM owners WHERE kind = 'audit' AND key = $1",
            SYSTEM_OWNER,
        )
        return None if row is None else (row["tenant"], row["group_name"])


async def record_run(
    audit: SelfAudit,
    actor: str,
    report: RunReport,
    token_id: str | None = None,
    *,
    always: bool = True,
) -> bool:
    """A retention run (not a dry one): always when an admin asked for it; the router's own
    runs only when they dropped, failed to drop, or refused."""
    totals = report.totals()
    quiet = (
        report.status == "done"
        and not totals["tables_dropped"]
        and not totals["shared_days_dropped"]
    )
    if report.status in ("skipped", "dry_run") or (quiet and not always):
        return False
    return await audit.record(
        actor,
        "retention.run",
        f"run {report.run_id}" if report.run_id else "retention run",
        status=report.status,
        as_of=report.as_of.isoformat(),
        message=report.message,
        token_id=token_id,
        **totals,
    )


def _shown(value: Any) -> Any:
    """Details as they go into attrs: numbers, booleans and short strings as they are,
    anything else as a quoted excerpt."""
    if isinstance(value, bool | int | float) or value is None:
        return value
    if isinstance(value, str) and len(value) <= MAX_DETAIL_CHARS:
        return value
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return [str(_shown(v)) for v in value][:64]
    return excerpt(value, MAX_DETAIL_CHARS)


async def _batches(records: list[dict[str, Any]]) -> AsyncIterator[list[tuple[int, Any]]]:
    yield list(enumerate(records))


@asynccontextmanager
async def standalone(settings: Settings) -> AsyncIterator[SelfAudit]:
    """A self-audit for a process without a router (the CLI): its own pools and catalog copy,
    for as long as the block runs."""
    metadata = await catalog_login.open_pool(settings)
    shard_pools = pools.ShardPools(settings.pools)
    try:
        catalog = CatalogCache(metadata, catalog_login.catalog_dsn(settings), settings.catalog)
        snapshot = await catalog.reload()
        await shard_pools.reconcile(snapshot)
        ingest = settings.ingest
        metrics = Metrics()
        owners = OwnerDirectory(metadata, catalog, audit_spread=ingest.spread_min_shards or None)
        service = IngestService(
            catalog,
            owners,
            PartWriter(shard_pools, metadata, catalog, ingest, settings.shared),
            IdempotencyStore(metadata, ingest.idempotency_lease_s, ingest.retry_after_s),
            ShardHealth(),
            ingest,
            metrics,
        )
        yield SelfAudit(service, catalog, metadata, metrics, settings.auth.audit_keep_days)
    finally:
        await shard_pools.close()
        await metadata.close()
