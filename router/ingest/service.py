"""The write path: validated records -> owner groups -> day tables -> parts placed on shards
-> written in parallel -> acknowledged only when every part committed."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from router import clock
from router.auth.scopes import Grant, check_key, key_denial
from router.catalog.cache import CatalogCache
from router.catalog.owners import OwnerDirectory
from router.catalog.snapshot import CatalogSnapshot, OwnerKind, OwnerMapping
from router.db.dsn import multi_host
from router.db.names import DayTable, day_table, parse_day_table
from router.db.shard_health import ShardHealth
from router.errors import Conflict, Invalid, TooLarge, Unavailable
from router.ingest import sharing, typed
from router.ingest.body import LineBlock, LineTooLong, too_long
from router.ingest.idempotency import Claim, IdempotencyStore
from router.ingest.owner_days import OwnerDayCounts
from router.ingest.records import (
    MAX_BIGINT,
    AuditRow,
    FlowRow,
    Limits,
    Location,
    audit_row,
    flow_row,
)
from router.ingest.screen import Screener, first_refusal, oldest_day
from router.ingest.writer import Part, PartFailed, PartWriter
from router.metrics import Metrics
from router.routing import placement
from router.settings import IngestSettings

log = logging.getLogger(__name__)

Records = AsyncIterator[list[tuple[int, Any]] | LineBlock]
# Decodes a block of NDJSON lines into valid rows at once, or None: the per-line path takes it.
BlockDecoder = Callable[[bytes, int, datetime, Limits], list[Any] | None]
_ZERO = timedelta(0)
FAILOVER_RETRY_S = 0.5
# Rows grouped between two turns of the event loop (a few ms): health checks stay fast.
YIELD_EVERY_ROWS = 1_000
# Ledger keys of requests sent without an Idempotency-Key; client keys are ASCII only.
INTERNAL_KEY_PREFIX = "\u00b7request:"


@dataclass
class Request:
    """One write: its records, where they are numbered from, its idempotency, and what its
    caller may touch (keys of other tenants are refused before anything is claimed).
    ``platform``: the router's own self-audit, the one writer of the platform's keys
    (``shardlog.*``); every other write naming one is refused."""

    records: Records
    label: str
    key: str | None
    digest: Callable[[], str]  # of the whole body, known once the records were read
    grant: Grant
    platform: bool = False


class IngestService:
    def __init__(
        self,
        catalog: CatalogCache,
        owners: OwnerDirectory,
        writer: PartWriter,
        idempotency: IdempotencyStore,
        health: ShardHealth,
        settings: IngestSettings,
        metrics: Metrics,
    ) -> None:
        self._catalog = catalog
        self._owners = owners
        self._writer = writer
        self._idempotency = idempotency
        self._health = health
        self._settings = settings
        self._metrics = metrics
        self._counts = OwnerDayCounts()
        self.screener = Screener(owners, catalog, settings.default_keep_days)

    def cached_owner_days(self) -> int:
        """Owner-days whose placed rows this router counts (bounded: owner_days.py)."""
        return len(self._counts)

    def request_limits(self) -> Limits:
        """The record limits of one request (a fresh set: it caches valid keys)."""
        settings = self._settings
        return Limits(
            max_content_bytes=settings.max_content_bytes,
            max_attrs_bytes=settings.max_attrs_bytes,
            max_owner_chars=settings.max_owner_chars,
            future_skew=timedelta(seconds=settings.future_skew_s),
            max_attrs_depth=settings.max_attrs_depth,
        )

    # --- validation --------------------------------------------------------------------

    async def _default_ts(self, request: Request) -> datetime:
        """Now, except on a keyed retry: then the first attempt's now, so that records without
        a ts land in the same day tables as before."""
        if request.key is not None:
            recorded = await self._idempotency.recorded_now(request.key)
            if recorded is not None:
                return recorded
        return clock.now()

    async def _collect(
        self,
        request: Request,
        parse: Callable[..., Any],
        default_ts: datetime,
        decode_block: BlockDecoder | None = None,
    ) -> list[Any]:
        now = clock.now()
        limits = self.request_limits()
        limits.default_ts = default_ts
        rows: list[Any] = []
        label, most = request.label, self._settings.max_records
        try:
            async for batch in request.records:
                if isinstance(batch, LineBlock):
                    decoded = None
                    if decode_block is not None:
                        decoded = decode_block(batch.data, len(rows), now, limits)
                    if decoded is not None:
                        if len(rows) + len(decoded) > most:
                            raise TooLarge(f"more than {most} records in one request", "records")
                        rows.extend(decoded)
                        await asyncio.sleep(0)
                        continue
                    batch = batch.records(len(rows))
                if len(rows) + len(batch) > most:
                    raise TooLarge(f"more than {most} records in one request", "records")
                rows.extend(
                    parse(raw, Location(label, position), now, limits) for position, raw in batch
                )
                await asyncio.sleep(0)
        except LineTooLong:
            raise too_long(label, len(rows), self._settings.max_record_bytes) from None
        return rows

    def _table_for(
        self,
        snapshot: CatalogSnapshot,
        mapping: OwnerMapping,
        ts: datetime,
        position: int,
        label: str,
        seen: dict[tuple[int, date], DayTable],
        today: date,
    ) -> DayTable:
        day = ts.date() if ts.utcoffset() == _ZERO else ts.astimezone(UTC).date()
        table = seen.get((mapping.id, day))
        if table is not None:
            return table
        keep = self._settings.default_keep_days
        limit = oldest_day(snapshot, mapping.kind, mapping.group, mapping.key, today, keep)
        if day < limit:
            raise Invalid(
                f"{label}[{position}]: ts {ts.isoformat()} is older than the retention window "
                f"(oldest day kept: {limit.isoformat()})",
                f"{label}[{position}].ts",
            )
        table = seen[(mapping.id, day)] = day_table(mapping.kind, mapping.id, day)
        return table

    async def _owned(
        self,
        request: Request,
        kind: OwnerKind,
        rows: list[Any],
        attribute: str,
        today: date,
    ) -> dict[str, OwnerMapping]:
        """The mappings of the rows' keys, claimed for the caller's tenant only once every row
        passed the screen (router/ingest/screen.py: the platform's keys, the token's prefixes,
        keys of another tenant, the retention of keys not mapped yet), so a refused write
        claims no key. A key another tenant's write claims meanwhile refuses the request, and
        this one's claims are rolled back (store.resolve_owners). The 403 names the first
        record that has a refused key."""
        grant = request.grant
        label = request.label
        screened = await self.screener.screen(
            grant,
            kind,
            rows,
            attribute,
            lambda position: f"{label}[{position}]",
            today,
            platform=request.platform,
            known_days=False,
        )
        if screened.refused:
            raise first_refusal(screened.refused)
        if screened.new_keys and request.key is not None:
            # A key reused for another body is refused before it claims anything.
            await self._idempotency.check_reuse(request.key, kind, request.digest())
        keys = {getattr(row, attribute) for row in rows}
        mappings = await self._owners.resolve(
            kind, keys, grant.tenant, exclusive=not grant.any_tenant
        )
        self._authorize(request, kind, rows, attribute, keys, mappings)
        return mappings

    @staticmethod
    def _authorize(
        request: Request,
        kind: OwnerKind,
        rows: list[Any],
        attribute: str,
        keys: set[str],
        mappings: dict[str, OwnerMapping],
    ) -> None:
        def tenant_of(key: str) -> str | None:
            mapping = mappings.get(key)
            return mapping.tenant if mapping is not None else None

        denied = {k for k in keys if key_denial(request.grant, kind, k, tenant_of(k)) is not None}
        if not denied:
            return
        row = next(row for row in rows if getattr(row, attribute) in denied)
        key = getattr(row, attribute)
        field = f"{request.label}[{row.position}].{attribute}"
        check_key(request.grant, kind, key, tenant_of(key), field)
        raise AssertionError("check_key let a denied key through")  # pragma: no cover

    # --- audit -------------------------------------------------------------------------

    async def write_audit(self, request: Request) -> dict[str, Any]:
        default_ts = await self._default_ts(request)
        rows = await self._collect(request, audit_row, default_ts, typed.audit_rows)
        return await self.write_audit_rows(request, rows, default_ts)

    async def write_audit_rows(
        self, request: Request, rows: list[AuditRow], default_ts: datetime
    ) -> dict[str, Any]:
        """Rows already validated (REST records parsed, or a log shipper's messages:
        router/protocols; the request's records are not read), written as write_audit writes
        them."""
        if not rows:
            return {"accepted": 0}
        snapshot = self._catalog.snapshot
        today = clock.today()
        owners = await self._owned(request, "audit", rows, "owner", today)
        tables: dict[DayTable, list[tuple[Any, ...]]] = {}
        mapping_of: dict[DayTable, OwnerMapping] = {}
        seen: dict[tuple[int, date], DayTable] = {}
        # The COPY rows of each (owner, day): one look-up per row (this loop runs per row).
        rows_of: dict[tuple[str, date], list[tuple[Any, ...]]] = {}
        for start in range(0, len(rows), YIELD_EVERY_ROWS):
            await asyncio.sleep(0)
            for row in rows[start : start + YIELD_EVERY_ROWS]:
                ts = row.ts
                if ts.tzinfo is UTC or ts.utcoffset() == _ZERO:
                    day = ts.date()
                else:
                    day = ts.astimezone(UTC).date()
                target = rows_of.get((row.owner, day))
                if target is None:
                    mapping = owners[row.owner]
                    table = self._table_for(
                        snapshot, mapping, ts, row.position, request.label, seen, today
                    )
                    target = rows_of[(row.owner, day)] = tables.setdefault(table, [])
                    mapping_of[table] = mapping
                target.append((ts, row.content, row.attrs))
        group_of = {table: mapping.group for table, mapping in mapping_of.items()}

        rng = placement.rng_for(request.key)
        planned = await self._deal_audit(snapshot, tables, mapping_of, rng)
        claim = await self._claim(
            request, "audit", {"now": default_ts.isoformat(), "parts": planned}
        )
        if claim is not None and claim.result is not None:
            self._count_parts(planned, -1)
            return claim.result
        recorded = claim.placement["parts"] if claim is not None else planned
        if recorded is not planned:  # a retry writes where its first attempt placed the rows
            self._count_parts(planned, -1)
            self._count_parts(recorded, 1)
        by_name = {table.name: table for table in tables}
        parts = []
        for part_id, spot in recorded.items():
            part_table = by_name.get(part_id.rsplit(":", 1)[0])
            if part_table is None:
                raise Conflict(
                    "this Idempotency-Key's earlier attempt placed its rows differently (its "
                    "owner was remapped meanwhile); send the rows again with a new key",
                    "Idempotency-Key",
                )
            rows_of_part = tables[part_table][spot["start"] : spot["stop"]]
            shareable = sharing.shareable(
                snapshot,
                mapping_of[part_table],
                part_table.day,
                self._writer.sharing,
                self._settings.default_keep_days,
            )
            parts.append(
                Part(
                    part_id,
                    part_table,
                    rows_of_part,
                    spot["shard"],
                    shareable,
                    mapping_of[part_table],
                )
            )

        ledger_key = self._ledger_key(claim)

        async def write(part: Part) -> None:
            await self._write_audit_part(part, group_of[part.table], claim, ledger_key, rng)

        return await self._run(claim, parts, write, {"accepted": len(rows)}, "audit")

    async def _deal_audit(
        self,
        snapshot: CatalogSnapshot,
        tables: dict[DayTable, list[tuple[Any, ...]]],
        mapping_of: dict[DayTable, OwnerMapping],
        rng: Any,
    ) -> dict[str, Any]:
        """Part id -> {start, stop, shard}: each owner-day's rows cut into parts, each part
        dealt to the shard of the owner's spread holding the fewest rows of that owner-day
        (counted here as they are dealt)."""
        self._counts.roll(clock.today())
        planned: dict[str, Any] = {}
        current: dict[int, OwnerMapping] = {}
        for table in sorted(tables):
            mapping = current.setdefault(table.owner_id, mapping_of[table])
            shards = self._active(snapshot, mapping.group)
            count = len(tables[table])
            spread = placement.widened(
                mapping.spread,
                len(shards),
                self._counts.rows(table.owner_id, table.day) + count,
                self._settings.spread_rows_per_shard,
            )
            if spread != mapping.spread:
                mapping = current[table.owner_id] = await self._owners.widen(mapping, spread)
            usable = set(self._health.usable(shards))
            subset = placement.spread_shards(table.owner_id, shards, mapping.spread, usable)
            spans = {
                f"{table.name}:{number}": span
                for number, span in enumerate(
                    placement.split(count, self._settings.batch_rows, len(subset))
                )
            }
            held = self._counts.held(table.owner_id, table.day)
            dealt = placement.deal_least(
                [(part_id, len(span)) for part_id, span in spans.items()], subset, held, rng
            )
            for part_id, span in spans.items():
                planned[part_id] = {"start": span.start, "stop": span.stop, "shard": dealt[part_id]}
                self._counts.add(table.owner_id, table.day, dealt[part_id], len(span))
        return planned

    def _count_parts(self, parts: dict[str, Any], sign: int) -> None:
        for part_id, spot in parts.items():
            table = parse_day_table(part_id.rsplit(":", 1)[0])
            if table is not None:
                rows = sign * (spot["stop"] - spot["start"])
                self._counts.add(table.owner_id, table.day, spot["shard"], rows)

    def _active(self, snapshot: CatalogSnapshot, group: str) -> tuple[str, ...]:
        shards = snapshot.active_shards(group)
        if not shards:
            raise Unavailable(
                f"shard group {group!r} has no active shard",
                retry_after_s=self._settings.retry_after_s,
            )
        return shards

    async def _write_audit_part(
        self, part: Part, group: str, claim: Claim | None, ledger_key: str, rng: Any
    ) -> None:
        shard = part.shard
        tried: set[str] = set()
        while True:
            try:
                await self._write(part, shard, ledger_key)
                return
            except PartFailed as failure:
                tried.add(shard)
                may_move = not failure.in_doubt and (claim is None or claim.first_attempt)
                candidates = self._catalog.snapshot.active_shards(group)
                replacement = placement.fallback(candidates, tried, rng) if may_move else None
                if replacement is None:
                    # In doubt, placed there by an earlier attempt, or nowhere else to go.
                    await self._write_after_failover(part, shard, ledger_key, failure)
                    return
                if claim is not None:
                    await self._idempotency.move_part(claim.key, part.id, replacement)
                log.warning("audit batch moved from %s to %s: %s", shard, replacement, failure)
                self._metrics.ingest_fallbacks.labels(shard).inc()
                shard = replacement

    async def _write_after_failover(
        self, part: Part, shard: str, ledger_key: str, failure: PartFailed
    ) -> None:
        """A shard with several hosts (Patroni primary + replicas) gets a new primary within
        its failover time: keep retrying there until SHARDLOG_INGEST__FAILOVER_WAIT_S. The
        ledger makes the retry of a part whose COMMIT was cut off write it at most once."""
        if not self._fails_over(shard):
            raise failure
        log.warning(
            "%s batch waits up to %gs for %s to fail over (%s, in doubt: %s)",
            part.table.kind,
            self._settings.failover_wait_s,
            shard,
            failure,
            failure.in_doubt,
        )
        deadline = time.monotonic() + self._settings.failover_wait_s
        while True:
            if time.monotonic() >= deadline:
                raise failure
            await asyncio.sleep(min(FAILOVER_RETRY_S, max(0.0, deadline - time.monotonic())))
            try:
                await self._write(part, shard, ledger_key)
                self._metrics.ingest_failover_retries.labels(shard).inc()
                return
            except PartFailed as again:
                failure = again

    def _fails_over(self, shard: str) -> bool:
        known = self._catalog.snapshot.shards.get(shard)
        return known is not None and multi_host(known.dsn)

    async def _write(self, part: Part, shard: str, ledger_key: str) -> None:
        kind = part.table.kind
        try:
            written = await self._writer.write(part, shard, ledger_key)
        except PartFailed:
            self._health.failed(shard)
            self._metrics.ingest_batches.labels(kind, shard, "failed").inc()
            raise
        self._health.succeeded(shard)
        outcome = "written" if written else "already_written"
        self._metrics.ingest_batches.labels(kind, shard, outcome).inc()
        if written:
            self._metrics.ingest_rows.labels(kind).inc(len(part.rows))

    # --- flows -------------------------------------------------------------------------

    async def write_flows(self, request: Request) -> dict[str, Any]:
        default_ts = await self._default_ts(request)
        rows = await self._collect(request, flow_row, default_ts, typed.flow_rows)
        return await self.write_flow_rows(request, rows, default_ts)

    async def write_flow_rows(
        self, request: Request, rows: list[FlowRow], default_ts: datetime
    ) -> dict[str, Any]:
        """Rows already validated (REST records parsed, or a collector's decoded flows; the
        request's records are not read), written as write_flows writes them."""
        if not rows:
            return {"accepted": 0}
        snapshot = self._catalog.snapshot
        today = clock.today()
        switches = await self._owned(request, "flow", rows, "switch", today)
        rings = {
            group: list(snapshot.serving_shards(group))
            for group in {m.group for m in switches.values()}
        }
        planned: dict[str, Any] = {
            "now": default_ts.isoformat(),
            "rings": rings,
            "batch_rows": self._settings.batch_rows,
        }
        claim = await self._claim(request, "flow", planned)
        if claim is not None and claim.result is not None:
            return claim.result
        if claim is not None:
            rings = claim.placement["rings"]
        batch_rows = int((claim.placement if claim else planned)["batch_rows"])
        for group, ring in rings.items():
            if not ring:
                raise Unavailable(
                    f"shard group {group!r} has no shard that is not down",
                    retry_after_s=self._settings.retry_after_s,
                )

        # Repeats of a 5-tuple within the request are merged here, so each staged batch holds
        # one row per flow and the database merge needs no GROUP BY.
        batches: dict[tuple[DayTable, str], dict[tuple[Any, ...], list[Any]]] = {}
        seen: dict[tuple[int, date], DayTable] = {}
        # Per (switch, day): its table, its group's ring and its batches by shard, so that a
        # row costs one look-up (this loop runs per row).
        cells: dict[tuple[str, date], tuple[DayTable, list[str], dict[str, Any]]] = {}
        for start in range(0, len(rows), YIELD_EVERY_ROWS):
            await asyncio.sleep(0)
            for row in rows[start : start + YIELD_EVERY_ROWS]:
                ts = row.ts
                if ts.tzinfo is UTC or ts.utcoffset() == _ZERO:
                    day = ts.date()
                else:
                    day = ts.astimezone(UTC).date()
                cell = cells.get((row.switch, day))
                if cell is None:
                    mapping = switches[row.switch]
                    table = self._table_for(
                        snapshot, mapping, ts, row.position, request.label, seen, today
                    )
                    cell = cells[(row.switch, day)] = (table, rings[mapping.group], {})
                table, ring, by_shard = cell
                key = (row.src_ip, row.dst_ip, row.src_port, row.dst_port, row.proto)
                shard = placement.flow_shard(placement.flow_key_hash(*key), ring)
                flows = by_shard.get(shard)
                if flows is None:
                    flows = by_shard[shard] = batches.setdefault((table, shard), {})
                merged = flows.get(key)
                if merged is None:
                    # The staged row, in ddl.FLOW_WRITE_COLUMNS' order.
                    flows[key] = [
                        row.src_ip,
                        row.dst_ip,
                        row.src_port,
                        row.dst_port,
                        row.ip_version,
                        row.proto,
                        row.bytes,
                        row.packets,
                        1,
                        ts,
                        ts if row.last_seen is None else row.last_seen,
                        row.tcp_flags,
                        row.sampling_rate,
                        False,
                    ]
                else:
                    _merge(merged, row)
        parts = []
        for (table, shard), flows in sorted(batches.items()):
            staged = list(flows.values())
            for number, span in enumerate(placement.split(len(staged), batch_rows, 1)):
                parts.append(
                    Part(
                        f"{table.name}@{shard}:{number}",
                        table,
                        staged[span.start : span.stop],
                        shard,
                    )
                )

        ledger_key = self._ledger_key(claim)

        async def write(part: Part) -> None:
            try:
                await self._write(part, part.shard, ledger_key)
            except PartFailed as failure:
                await self._write_after_failover(part, part.shard, ledger_key, failure)

        return await self._run(claim, parts, write, {"accepted": len(rows)}, "flow")

    # --- shared ------------------------------------------------------------------------

    @staticmethod
    def _ledger_key(claim: Claim | None) -> str:
        """Every part is recorded in its shard's ledger, under the client's Idempotency-Key or
        one of the request's own, so a part retried after a cut-off COMMIT is never stored
        twice."""
        return claim.key if claim is not None else f"{INTERNAL_KEY_PREFIX}{uuid.uuid4().hex}"

    async def _claim(self, request: Request, kind: str, planned: dict[str, Any]) -> Claim | None:
        if request.key is None:
            return None
        return await self._idempotency.claim(request.key, kind, request.digest(), planned)

    async def _run(
        self,
        claim: Claim | None,
        parts: list[Part],
        write: Callable[[Part], Any],
        result: dict[str, Any],
        kind: OwnerKind,
    ) -> dict[str, Any]:
        # Every part runs to its end even when another fails: cancelling one mid-COMMIT would
        # leave its outcome unknown.
        outcomes = await asyncio.gather(*(write(part) for part in parts), return_exceptions=True)
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        if claim is not None:
            await self._idempotency.finish(claim.key, None if failures else result)
        if not failures:
            return result
        unexpected = [f for f in failures if not isinstance(f, PartFailed)]
        if unexpected:
            raise unexpected[0]
        raise self._unavailable([f for f in failures if isinstance(f, PartFailed)], kind)

    def _unavailable(self, failures: list[PartFailed], kind: OwnerKind) -> Unavailable:
        shards = sorted({f.shard for f in failures})
        detail = "; ".join(sorted({str(f) for f in failures}))
        return Unavailable(
            f"{kind} rows for shard(s) {', '.join(shards)} were not written ({detail}). Other "
            "parts of the request may have committed: retry with the same Idempotency-Key, "
            "which writes only what is missing",
            retry_after_s=self._settings.retry_after_s,
        )


def _merge(merged: list[Any], row: FlowRow) -> None:
    """A repeat of a flow's 5-tuple within one request folded into its staged row (bytes,
    packets, flow_count, first and last seen, TCP flags, sampling rate, sampling_mixed), as
    ddl.flow_merge_sql folds a batch into the day table."""
    merged[6] = min(merged[6] + row.bytes, MAX_BIGINT)
    merged[7] = min(merged[7] + row.packets, MAX_BIGINT)
    merged[8] += 1
    merged[9] = min(merged[9], row.ts)
    merged[10] = max(merged[10], row.ts if row.last_seen is None else row.last_seen)
    if row.tcp_flags is not None:
        merged[11] = row.tcp_flags if merged[11] is None else merged[11] | row.tcp_flags
    if (merged[12] or 1) != (row.sampling_rate or 1):
        merged[13] = True
    if row.sampling_rate is not None:
        merged[12] = max(merged[12] or 0, row.sampling_rate)
