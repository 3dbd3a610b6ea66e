"""Runs a search: plan the targets, query every shard in parallel under a deadline, merge,
and cut the page with its cursors."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any, Literal

import asyncpg
import orjson

from router.auth.scopes import KEY_NAME, Grant
from router.catalog import mirror
from router.catalog import tables as day_tables
from router.catalog.cache import CatalogCache
from router.catalog.owners import OwnerDirectory
from router.catalog.snapshot import OwnerMapping
from router.db.failures import (
    DRIVER_ERRORS,
    coordinator_error,
    describe,
    is_transient,
    unavailable_when_unreachable,
)
from router.db.names import DayTable, Kind, parent_table, shard_day, shared_parent
from router.db.pools import ShardPools
from router.errors import BadRequest, ShardlogError, Unavailable
from router.routing.search_plan import SearchPlan, ShardTarget, plan_search
from router.search import (
    coverage,
    estimate,
    freshness,
    items,
    refs,
    segment_estimate,
    segment_sql,
    sql,
)
from router.search.cursor import (
    POSITION_HEADROOM,
    Cursor,
    CursorCodec,
    Direction,
    Position,
    query_digest,
)
from router.search.exporter import Exporter
from router.search.lines import ExportFormat
from router.search.merge import Row, keep_first, merge
from router.search.page import items_of, merged_rows, shard_share, short_shards
from router.search.query import AuditQuery, FlowQuery, Keys, covered_keys
from router.search.snapshot import NOT_PINNED, Pin, ShardSnapshot, pinned_plan
from router.search.streams import ShardFailure, refuse_partial
from router.settings import SearchSettings

CountMode = Literal["none", "estimate", "exact"]
Backend = Literal["fanout", "fdw"]
Query = AuditQuery | FlowQuery
SampleSql = Callable[[Any, list[DayTable], int, int, ShardSnapshot | None], tuple[str, list[Any]]]
# How a shard's answers to its statements add up: a page keeps its first rows, a count all.
Combine = Callable[[list[Any], list[Any]], list[Any]]
SEARCH_RETRY_PAUSE_S = 0.2

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    rows: list[list[Row]] = field(default_factory=list)
    failures: list[ShardFailure] = field(default_factory=list)


@dataclass
class Pinning:
    """How a consistent search reads its shards: on their primaries (a standby may lag behind a
    snapshot), each under its snapshot; ``taking``: the first page, which takes them."""

    snapshots: dict[str, ShardSnapshot] = field(default_factory=dict)
    taking: bool = False

    def of(self, shard: str) -> ShardSnapshot | None:
        return self.snapshots.get(shard)

    def reading(self) -> Pinning:
        """The same snapshots (shared: those taken so far and later), none taken: for a
        shard's statements after its first."""
        return Pinning(self.snapshots)


def _new_failures(known: list[ShardFailure], more: list[ShardFailure]) -> list[ShardFailure]:
    """Those of ``more`` whose shard ``known`` does not name yet."""
    names = {f.shard for f in known}
    return [f for f in more if f.shard not in names]


def _concatenate(kept: list[asyncpg.Record], more: list[asyncpg.Record]) -> list[asyncpg.Record]:
    return kept + more


def _digest(query: Query, consistent: bool, visibility: dict[str, Any]) -> str:
    """What a cursor is bound to: the query, which keys the token reaches when the catalog
    decides the covered set (router/search/coverage.py), and the mode: consistent pages are
    another query, a cursor of one mode is refused by the other."""
    binding = {**query.binding(), **visibility}
    return query_digest({**binding, "consistent": True} if consistent else binding)


class SearchService:
    def __init__(
        self,
        metadata: asyncpg.Pool,
        catalog: CatalogCache,
        owners: OwnerDirectory,
        pools: ShardPools,
        settings: SearchSettings,
    ) -> None:
        self._metadata = metadata
        self._catalog = catalog
        self._owners = owners
        self._pools = pools
        self._settings = settings
        self.codec: CursorCodec | None = None
        self.secret = b""
        self._exporter = Exporter(self, pools, settings)

    async def load_secret(self) -> None:
        if self._settings.cursor_secret:
            secret = self._settings.cursor_secret.encode()
        else:
            secret = await self._metadata.fetchval(
                "SELECT secret FROM router_secrets WHERE name = 'cursor'"
            )
        self.secret = bytes(secret)
        self.codec = CursorCodec(self.secret, self._settings.cursor_ttl_s)

    # --- planning ----------------------------------------------------------------------

    async def plan(
        self, query: Query, grant: Grant, *, by_shard_day: bool = False
    ) -> tuple[SearchPlan, dict[int, str]]:
        """The targets, and the key of every owner (or switch) covered, by catalog id
        (``by_shard_day``: fan-out pages and their counts, see ``locate``)."""
        kind, keys = covered_keys(query)
        days = query.window.days()
        located, owners = await self.locate(
            kind,
            keys,
            grant,
            (days[0], days[-1]),
            (self._settings.max_matched_owners, "SHARDLOG_SEARCH__MAX_MATCHED_OWNERS"),
            by_shard_day=by_shard_day,
        )
        if not located:
            return SearchPlan(()), owners
        states = {s.name: s.state for s in self._catalog.snapshot.shards.values()}
        return plan_search(located, days, states), owners

    async def locate(
        self,
        kind: Kind,
        keys: Keys,
        grant: Grant,
        days: tuple[date, date],
        most: tuple[int, str],
        *,
        by_shard_day: bool = False,
    ) -> tuple[list[tuple[str, DayTable]], dict[int, str]]:
        """(shard, owner-day) of every owner covered, and the key of each, by catalog id.
        ``most``: how many a prefix or no key may cover, and the setting that says so.

        ``by_shard_day``: an audit search or report of a prefix or of no owner reads the shared
        tables of the window as one branch per shard-day, whose rows name their owners
        (docs/architecture.md, "Reading both layouts"): only the owners with own tables in the
        window are covered by name, and count against ``most``; the others' keys are the
        answer's to find (``name_owners``), held to the token's reach by the shards' mirrors,
        which a remap's pending corrections are applied to first (``settle_mirrors``)."""
        shard_days = by_shard_day and kind == "audit" and keys.expands
        owners = await coverage.covered(
            self._metadata, self._owners, kind, keys, grant, days, *most, own_only=shard_days
        )
        located = (
            await day_tables.located(self._metadata, kind, owners, days[0], days[-1])
            if owners
            else []
        )
        if not shard_days:
            return located, owners
        named = {ident for ident, key in owners.items() if key in keys.listed}
        # The shared rows of owners covered by the prefix (or none) are the shard-days'.
        located = [
            (shard, table if table.owner_id in named else replace(table, shared=False))
            for shard, table in located
        ]
        located = [(shard, table) for shard, table in located if table.own or table.shared]
        reach = coverage.reach(kind, keys, grant, named)
        found = await day_tables.shard_days(self._metadata, kind, days[0], days[-1])
        if found:
            await self.settle_mirrors(kind)
        return located + [
            (shard, replace(shard_day(kind, day, reach), shared_compacted=compacted))
            for shard, day, compacted in found
        ], owners

    async def settle_mirrors(self, kind: Kind) -> None:
        """Before a reader holds rows to a token's reach through the shards' mirrors: the
        mirrors a remap left to correct corrected (router/catalog/mirror.py, ``settle``), or
        503 while a shard holding one cannot be reached."""
        with unavailable_when_unreachable("metadata database", retry_after_s=1):
            readable = [
                name
                for name, shard in self._catalog.snapshot.shards.items()
                if shard.state in ("active", "draining")
            ]
            left = await mirror.settle(self._metadata, self._pools, kind, readable)
        if left:
            raise Unavailable(
                f"the shards' mirrors of {len(left)} remapped {kind} owner(s) could not all be "
                "corrected (a shard is unreachable): searches, reports and exports of a prefix "
                "or of no owner answer once they are; retry, or name the owners",
                retry_after_s=5,
            )

    async def name_owners(
        self,
        query: Query,
        grant: Grant,
        answers: list[tuple[str, list[Any]]],
        owners: dict[int, str],
    ) -> None:
        """Add to ``owners`` the keys of the owners that shard-day branches named in
        ``answers``, each checked against the catalog as a listed key would be. The shards'
        mirrors chose them; a mirror can be stale (a remap it missed), so an owner the search
        does not cover fails the page with 503 naming the shard, and that mirror row is
        repaired: no row of it reaches the answer."""
        unknown = {r["owner_id"] for _, records in answers for r in records} - owners.keys()
        if not unknown:
            return
        kind, keys = covered_keys(query)
        found = await self._owners.by_ids(kind, unknown)
        for shard, records in answers:
            for ident in sorted({r["owner_id"] for r in records} & unknown):
                mapping = found.get(ident)
                problem = (
                    "not in the catalog"
                    if mapping is None
                    else coverage.denial(kind, keys, grant, mapping.key, mapping.tenant)
                )
                if problem is not None:
                    await self._repair_mirror(shard, kind, ident, mapping, problem)
                    raise Unavailable(
                        f"shard {shard}'s mirror of owner mappings was out of date and is "
                        "being repaired: retry",
                        retry_after_s=1,
                    )
                assert mapping is not None
                owners[ident] = mapping.key

    async def _repair_mirror(
        self, shard: str, kind: Kind, ident: int, mapping: OwnerMapping | None, problem: str
    ) -> None:
        log.warning(
            "shard %s's mirror of %s owner %d disagrees with the catalog (%s): repairing it",
            shard,
            kind,
            ident,
            problem,
        )
        try:
            if mapping is None:
                await mirror.forget(self._pools.writer(shard), kind, ident)
            else:
                await mirror.write_mirror(self._pools.writer(shard), [mapping])
        except (TimeoutError, *DRIVER_ERRORS, ShardlogError) as failure:
            log.warning("the mirror of shard %s was not repaired: %s", shard, failure)

    # --- one shard ---------------------------------------------------------------------

    async def fetch_target(
        self,
        target: ShardTarget,
        build: Any,
        combine: Combine,
        *,
        pinning: Pinning | None = None,
    ) -> list[Any]:
        """A shard's answer: one statement per batch of its tables, one after the other, each
        answer combined with those before it (a page keeps only its first rows). A consistent
        search's first page takes the shard's snapshot before its first statement only: every
        batch reads under that one snapshot."""
        kept: list[asyncpg.Record] = []
        for index, batch in enumerate(target.batches()):
            reading = pinning if pinning is None or index == 0 else pinning.reading()
            kept = combine(kept, await self._fetch_retrying(batch, build, reading))
        return kept

    async def _fetch_retrying(
        self, target: ShardTarget, build: Any, pinning: Pinning | None
    ) -> list[asyncpg.Record]:
        """One retry on a connection that broke (a pooled connection to a server that
        restarted, a shard in the middle of a failover); a second failure goes up and the
        answer is partial."""
        try:
            return await self._fetch_once(target, build, pinning)
        except DRIVER_ERRORS as exc:
            if isinstance(exc, asyncpg.QueryCanceledError | TimeoutError) or not is_transient(exc):
                raise
        await asyncio.sleep(SEARCH_RETRY_PAUSE_S)
        return await self._fetch_once(target, build, pinning)

    async def _fetch_once(
        self, target: ShardTarget, build: Any, pinning: Pinning | None
    ) -> list[asyncpg.Record]:
        tables = list(target.tables)
        pool = self._pools.reader(target.shard, primary=pinning is not None)
        for attempt in range(2):
            try:
                # One deadline for the wait for a connection and the statements: asyncpg's own
                # acquire timeout runs the acquire as a task of its own, each time.
                async with (
                    asyncio.timeout(self._settings.shard_timeout_s),
                    pool.acquire() as connection,
                ):
                    if pinning is not None and pinning.taking:
                        # Before the page's statement, which then sees all the snapshot sees.
                        pinning.snapshots[target.shard] = ShardSnapshot.parse(
                            await connection.fetchval(
                                "SELECT pg_current_snapshot()::text",
                                timeout=self._settings.shard_timeout_s,
                            )
                        )
                    return await freshness.read(
                        connection, build, tables, self._settings.shard_timeout_s
                    )
            except asyncpg.UndefinedTableError:
                if attempt:
                    raise
                # A table dropped since it was planned (retention): forget it and go on. The
                # primary decides; a standby may only not have replayed a new table yet, so
                # the second attempt reads from the primary.
                tables = await self.existing_tables(target.shard, tables)
                if not tables:
                    return []
                pool = self._pools.reader(target.shard, primary=True)
        return []

    async def existing_tables(self, shard: str, tables: list[Any]) -> list[Any]:
        """Those of ``tables`` (owner-days) still on the shard, each reduced to the places it
        still has (its own table, the shared table of its day); the own tables gone leave the
        catalog (retention dropped them since they were planned)."""
        wanted = {t.name for t in tables if t.own} | {t.shared_name for t in tables if t.shared}
        names = {
            r["relname"]
            for r in await self._pools.reader(shard, primary=True).fetch(
                "SELECT relname FROM pg_class WHERE relname = ANY($1::text[])", sorted(wanted)
            )
        }
        kept = []
        for table in tables:
            own = table.own and table.name in names
            shared = table.shared and table.shared_name in names
            if table.own and not own:
                await self._metadata.execute(
                    "DELETE FROM day_tables WHERE kind = $1 AND owner_id = $2 AND day = $3 "
                    "AND shard = $4",
                    table.kind,
                    table.owner_id,
                    table.day,
                    shard,
                )
            if own or shared:
                kept.append(replace(table, own=own, shared=shared))
        return kept

    async def fan_out(
        self,
        plan: SearchPlan,
        build: Any,
        combine: Combine = _concatenate,
        *,
        pinning: Pinning | None = None,
    ) -> tuple[list[Any], Outcome]:
        outcome = Outcome()
        outcome.failures += [ShardFailure(s, "marked down") for s in plan.unavailable]
        results = await asyncio.gather(
            *(
                self.fetch_target(
                    t, lambda tables, t=t: build(t.shard, tables), combine, pinning=pinning
                )
                for t in plan.targets
            ),
            return_exceptions=True,
        )
        answers: list[Any] = []
        for target, result in zip(plan.targets, results, strict=True):
            if isinstance(result, asyncpg.InvalidRegularExpressionError):
                raise BadRequest(f"invalid regular expression: {result}", "q")
            if isinstance(result, TimeoutError | asyncpg.QueryCanceledError):
                outcome.failures.append(
                    ShardFailure(
                        target.shard,
                        f"no answer within {self._settings.shard_timeout_s:g}s "
                        "(SHARDLOG_SEARCH__SHARD_TIMEOUT_S)",
                        timed_out=True,
                    )
                )
            elif isinstance(result, DRIVER_ERRORS) and is_transient(result):
                outcome.failures.append(ShardFailure(target.shard, describe(result)))
            elif isinstance(result, asyncpg.UndefinedColumnError) and pinning is not None:
                outcome.failures.append(
                    ShardFailure(
                        target.shard,
                        "a day table there lacks created_xid (a router older than consistent "
                        f"search made it after schema/shard/0005 ran): {describe(result)}",
                    )
                )
            elif isinstance(result, BaseException):
                raise result
            else:
                answers.append((target.shard, result))
        return answers, outcome

    _refuse_partial = staticmethod(lambda failures: refuse_partial(failures, "searched"))

    def _cursors(
        self, page: list[Row], more: bool, cursor: Cursor | None, pin: Pin | None, digest: str
    ) -> tuple[str | None, str | None]:
        """The page's next and previous cursors."""
        if not page:
            return None, None
        first, last = self._position(page[0]), self._position(page[-1])
        # The first cursors of a consistent search leave room for any later position.
        headroom = POSITION_HEADROOM if cursor is None else 0

        def encode(position: Position, direction: Direction) -> str:
            assert self.codec is not None
            return self.codec.encode(Cursor(position, direction, pin), digest, headroom)

        if cursor is None:
            return (encode(last, "next") if more else None), None
        if cursor.direction == "prev":
            return encode(last, "next"), (encode(first, "prev") if more else None)
        return (encode(last, "next") if more else None), encode(first, "prev")

    # --- a page ------------------------------------------------------------------------

    async def search(
        self,
        query: Query,
        limit: int,
        cursor_text: str | None,
        count: CountMode,
        partial_ok: bool,
        backend: Backend = "fanout",
        *,
        grant: Grant,
        consistent: bool = False,
    ) -> dict[str, Any]:
        assert self.codec is not None
        if consistent and backend == "fdw":
            raise BadRequest(
                "consistent=true keeps every shard to a snapshot of its own, which one query "
                "through the coordinator cannot do: use backend=fanout",
                "consistent",
            )
        kind, keys = covered_keys(query)
        digest = _digest(query, consistent, coverage.visibility(kind, keys, grant))
        cursor = self.codec.decode(cursor_text, digest) if cursor_text else None
        plan, owners = await self.plan(query, grant, by_shard_day=backend == "fanout")
        backwards = cursor is not None and cursor.direction == "prev"
        descending = (query.order == "desc") != backwards
        after = cursor.position if cursor else None
        pin = cursor.pin if cursor else None
        pinning = Pinning(dict(pin.snapshots) if pin else {}, taking=pin is None)
        not_pinned: list[str] = []
        if pin is not None:
            plan, not_pinned = pinned_plan(plan, pin)

        share = shard_share(limit + 1, len(plan.targets))

        def build(shard: str, tables: list[Any]) -> tuple[str, list[Any]]:
            return sql.page_sql(query, tables, shard, after, descending, share, pinning.of(shard))

        if backend == "fdw":
            records = await self._coordinator(
                query,
                plan,
                lambda sources: sql.fdw_page_sql(query, sources, after, descending, limit + 1),
            )
            outcome = Outcome()
            rows = [self._row(record, record["shard"], owners, kind) for record in records]
        else:
            answers, outcome = await self.fan_out(
                plan,
                build,
                keep_first(share, descending),
                pinning=pinning if consistent else None,
            )
            outcome.failures += [ShardFailure(s, f"{NOT_PINNED} here") for s in not_pinned]
            if consistent and pin is None:
                pin = self._pin(plan, pinning, outcome)
                plan, _ = pinned_plan(plan, pin)
            full = {shard for shard, records in answers if len(records) == share}
            completed = await self._complete(
                query,
                plan,
                dict(answers),
                full,
                (descending, limit + 1),
                outcome,
                pinning.reading() if consistent else None,
            )
            if outcome.failures and not partial_ok:
                self._refuse_partial(outcome.failures)
            await self.name_owners(query, grant, completed, owners)
            rows = await merged_rows(
                completed,
                descending,
                limit + 1,
                lambda shard, record: self._row(record, shard, owners, kind),
            )
        more = len(rows) > limit
        page = rows[:limit]
        if backwards:
            page.reverse()
        next_cursor, prev_cursor = self._cursors(page, more, cursor, pin, digest)
        counted: dict[str, Any] | None
        if backend == "fdw" and count == "exact":
            counted = await self._fdw_count(query, plan)
        else:
            # Estimates are made on the shards for either backend; the coordinator cannot
            # sample them. Like every fdw answer, an fdw estimate is never partial.
            pinned = Pinning(pinning.snapshots) if consistent else None
            counted = await self._count(
                query, plan, count, partial_ok and backend == "fanout", outcome, pinned
            )
        return {
            "items": await items_of(page, functools.partial(self.item, kind)),
            "next_cursor": next_cursor,
            "prev_cursor": prev_cursor,
            "count": counted,
            "partial": bool(outcome.failures),
            "failed_shards": [{"shard": f.shard, "reason": f.reason} for f in outcome.failures],
        }

    async def _complete(
        self,
        query: Query,
        plan: SearchPlan,
        answers: dict[str, list[Any]],
        full: set[str],
        order: tuple[bool, int],
        outcome: Outcome,
        pinning: Pinning | None,
    ) -> list[tuple[str, list[Any]]]:
        """The shards' answers completed until they hold the first ``wanted`` rows of all
        (``order``: descending, wanted): a shard asked for its share (page.shard_share) whose
        rows all made the page so far is asked for more, after its last row, until none is."""
        descending, wanted = order
        while short := short_shards(answers, full, descending, wanted):
            targets = tuple(t for t in plan.targets if t.shard in short)

            def build(shard: str, tables: list[Any]) -> tuple[str, list[Any]]:
                last, cap = short[shard]
                after = Position(last["ts"], shard, last["owner_id"], last["id"])
                snapshot = pinning.of(shard) if pinning else None
                return sql.page_sql(query, tables, shard, after, descending, cap, snapshot)

            more, extra = await self.fan_out(
                SearchPlan(targets),
                build,
                keep_first(max(cap for _, cap in short.values()), descending),
                pinning=pinning,
            )
            outcome.failures += _new_failures(outcome.failures, extra.failures)
            full = {shard for shard, records in more if len(records) >= short[shard][1]}
            for shard, records in more:
                answers[shard] = answers[shard] + list(records)
        return list(answers.items())

    async def _count(
        self,
        query: Query,
        plan: SearchPlan,
        mode: CountMode,
        partial_ok: bool,
        outcome: Outcome,
        pinning: Pinning | None,
    ) -> dict[str, Any] | None:
        if mode == "none":
            return None
        if mode == "exact":
            value, failures = await self._exact_count(query, plan, pinning)
            counted = {"value": value, "exact": not failures, "method": "count", "bounds": None}
        else:
            counted, failures = await self._estimated(query, plan, pinning)
        if failures and not partial_ok:
            self._refuse_partial(failures)
        outcome.failures += _new_failures(outcome.failures, failures)
        return counted

    async def _estimated(
        self, query: Query, plan: SearchPlan, pinning: Pinning | None
    ) -> tuple[dict[str, Any], list[ShardFailure]]:
        """count=estimate: the rows of small owner-days in shared tables counted (an owner-day
        stays shared up to SHARDLOG_SHARED__OWN_TABLE_ROWS rows, read through the owner's
        index), the own tables estimated, the two added."""
        shared, own = plan.shared_rows(), plan.own_rows()
        if shared.empty:
            return await self._own_estimate(query, plan, pinning)
        if own.empty:
            return await self._shared_count(query, shared, pinning)
        (counted, failures), (shared_counted, more) = await asyncio.gather(
            self._own_estimate(query, own, pinning), self._shared_count(query, shared, pinning)
        )
        failures += _new_failures(failures, more)
        return segment_estimate.added(counted, shared_counted, bool(failures)), failures

    async def _shared_count(
        self, query: Query, plan: SearchPlan, pinning: Pinning | None
    ) -> tuple[dict[str, Any], list[ShardFailure]]:
        """The shared rows of a plan: counted on the heap (a small owner-day's rows, read
        through the owner's index); in compacted shard-days, from their segments' metadata
        (opened all when they hold few rows, else a share of them)."""
        packed = plan.shared_compacted()
        if not packed or not isinstance(query, AuditQuery):
            value, failures = await self._exact_count(query, plan, pinning)
            return segment_estimate.counted(value, bool(failures)), failures
        heap_plan = plan.without(packed)
        segments_part = self._segment_estimate(
            query, plan.only(packed), pinning, segment_sql.shared_sample_sql
        )
        if heap_plan.empty:
            (segments, failures), value = await segments_part, 0
        else:
            (value, failures), (segments, more) = await asyncio.gather(
                self._exact_count(query, heap_plan, pinning), segments_part
            )
            failures += _new_failures(failures, more)
        if segments.exact:
            return segment_estimate.counted(value + segments.value, bool(failures)), failures
        return segment_estimate.answer((value, "count"), segments, bool(failures)), failures

    async def _own_estimate(
        self, query: Query, plan: SearchPlan, pinning: Pinning | None
    ) -> tuple[dict[str, Any], list[ShardFailure]]:
        compacted = plan.compacted()
        if compacted:
            return await self._compacted_estimate(query, plan, compacted, pinning)
        value, method, failures = await self._estimate(query, plan, pinning)
        exact = method == "count" and not failures
        return {"value": value, "exact": exact, "method": method, "bounds": None}, failures

    async def _compacted_estimate(
        self,
        query: Query,
        plan: SearchPlan,
        compacted: frozenset[tuple[str, str]],
        pinning: Pinning | None,
    ) -> tuple[dict[str, Any], list[ShardFailure]]:
        """An estimate of a plan with compacted owner-days: the heap day tables' estimate (if
        any) and the compacted ones' from their segments (router/search/segment_estimate.py),
        side by side."""
        heap_plan = plan.without(compacted)
        segments_part = self._segment_estimate(query, plan.only(compacted), pinning)
        if heap_plan.empty:
            segments, failures = await segments_part
            return segment_estimate.answer(None, segments, bool(failures)), failures
        (value, method, failures), (segments, more) = await asyncio.gather(
            self._estimate(query, heap_plan, pinning), segments_part
        )
        failures += _new_failures(failures, more)
        return segment_estimate.answer((value, method), segments, bool(failures)), failures

    async def _segment_estimate(
        self,
        query: Query,
        plan: SearchPlan,
        pinning: Pinning | None,
        sample_sql: SampleSql = segment_sql.sample_sql,
    ) -> tuple[segment_estimate.SegmentCount, list[ShardFailure]]:
        """Compacted owner-days (the shared rows of compacted shard-days: ``sample_sql`` is
        segment_sql.shared_sample_sql), on each shard in one statement: their candidate
        segments all counted when they are few, else a share of them opened and
        extrapolated."""
        below = self._settings.estimate_segment_count_below_rows
        sample = self._settings.estimate_segment_sample_rows

        def build(shard: str, tables: list[Any]) -> tuple[str, list[Any]]:
            snapshot = pinning.of(shard) if pinning else None
            return sample_sql(query, tables, below, sample, snapshot)

        answers, outcome = await self.fan_out(plan, build, pinning=pinning)
        samples = [segment_estimate.OwnerDaySample(*r) for _, records in answers for r in records]
        return segment_estimate.extrapolate(samples), outcome.failures

    async def _exact_count(
        self, query: Query, plan: SearchPlan, pinning: Pinning | None
    ) -> tuple[int, list[ShardFailure]]:
        answers, outcome = await self.fan_out(
            plan,
            lambda shard, tables: sql.count_sql(
                query, tables, pinning.of(shard) if pinning else None
            ),
            pinning=pinning,
        )
        value = sum(int(r[0] or 0) for _, records in answers for r in records)
        return value, outcome.failures

    async def _planner_rows(
        self, plan: SearchPlan, build: Any, pinning: Pinning | None
    ) -> tuple[int, list[ShardFailure]]:
        """The planner's row estimates of an EXPLAIN per statement, summed."""
        answers, outcome = await self.fan_out(plan, build, pinning=pinning)
        plans = [orjson.loads(r[0]) for _, records in answers for r in records]
        return sum(int(plan[0]["Plan"]["Plan Rows"]) for plan in plans), outcome.failures

    async def _estimate(
        self, query: Query, plan: SearchPlan, pinning: Pinning | None
    ) -> tuple[int, str, list[ShardFailure]]:
        """A time range alone: the planner's estimate (``_range_estimate``); otherwise a
        sample of the range, a larger one when the first was not sure enough, or a count when
        sampling would not pay (router/search/estimate.py). Samples ignore a consistent
        search's snapshots."""
        if sql.filter_parts(query, sql.Params())[1] == "true":
            return await self._range_estimate(query, plan, pinning)
        limits = estimate.Limits.of(self._settings)
        planner_range: int | None = None
        if isinstance(query, AuditQuery):
            first, ceiling = limits.first_fraction, 1.0
            (planner_range, failures), (found, more) = await asyncio.gather(
                self._planner_rows(
                    plan, lambda _s, tables: sql.range_estimate_sql(query, tables), pinning
                ),
                self._sample(query, plan, first, pinning),
            )
            failures += _new_failures(failures, more)
        else:
            ceiling = estimate.FLOW_FRACTIONS[1]
            found, failures = await self._sample(query, plan, estimate.FLOW_FRACTIONS[0], pinning)
        guess = estimate.estimate(found, planner_range)
        step = estimate.next_step(found, guess, ceiling, limits)
        if step.action == "count":
            value, more = await self._exact_count(query, plan, pinning)
            return value, "count", failures + _new_failures(failures, more)
        if step.action == "sample":
            found, more = await self._sample(query, plan, step.fraction, pinning)
            failures += _new_failures(failures, more)
            guess = estimate.estimate(found, planner_range, guess.by_planner)
        # A sample of every row (small tables are read whole) counted them, unless a consistent
        # search's snapshots should have been kept to.
        method = "count" if found.fraction >= 1 and pinning is None else "sample"
        return round(guess.value), method, failures

    async def _range_estimate(
        self, query: Query, plan: SearchPlan, pinning: Pinning | None
    ) -> tuple[int, str, list[ShardFailure]]:
        """A time range alone: the planner's rows, but for the tables it has no statistics of
        yet or outdated ones (a table written a moment ago), whose rows in the range are
        counted (such a table holds at most what came since its last analysis)."""
        (stale, failures), (value, planned) = await asyncio.gather(
            self._stale_tables(plan, pinning),
            self._planner_rows(plan, lambda _s, tables: sql.estimate_sql(query, tables), pinning),
        )
        failures += _new_failures(failures, planned)
        if not stale:
            return value, "planner", failures
        analysed = plan.without(stale)
        (counted, more), (value, planned) = await asyncio.gather(
            self._exact_count(query, plan.only(stale), pinning),
            self._planner_rows(
                analysed, lambda _s, tables: sql.estimate_sql(query, tables), pinning
            ),
        )
        failures += _new_failures(failures, more) + _new_failures(failures, planned)
        return counted + value, "planner" if analysed.targets else "count", failures

    async def _stale_tables(
        self, plan: SearchPlan, pinning: Pinning | None
    ) -> tuple[set[tuple[str, str]], list[ShardFailure]]:
        """The (shard, table name) of the plan's tables whose statistics the planner cannot
        go by (router/search/sql.py, stale_statistics_sql)."""
        answers, outcome = await self.fan_out(
            plan, lambda _shard, tables: sql.stale_statistics_sql(tables), pinning=pinning
        )
        return {(shard, r[0]) for shard, records in answers for r in records}, outcome.failures

    async def _sample(
        self, query: Query, plan: SearchPlan, fraction: float, pinning: Pinning | None
    ) -> tuple[estimate.Tally, list[ShardFailure]]:
        if isinstance(query, AuditQuery):
            audit_query = query
            answers, outcome = await self.fan_out(
                plan,
                lambda _shard, tables: sql.audit_sample_sql(
                    audit_query, tables, fraction, estimate.MIN_PAGES
                ),
                pinning=pinning,
            )
            sums = [estimate.PageSums(*r) for _, records in answers for r in records]
            return estimate.audit_tally(sums), outcome.failures
        flow_query, classes = query, estimate.flow_classes(fraction)
        answers, outcome = await self.fan_out(
            plan,
            lambda _shard, tables: sql.flow_sample_sql(flow_query, tables, classes),
            pinning=pinning,
        )
        counts = [(r["hits"], r["in_range"]) for _, records in answers for r in records]
        return estimate.flow_tally(counts, classes), outcome.failures

    # --- the coordinator (postgres_fdw) ----------------------------------------------

    async def _coordinator(
        self, query: Query, plan: SearchPlan, build: Any
    ) -> list[asyncpg.Record]:
        """One query through the covered owners' parent tables on the coordinator, and through
        the shared parent for those with rows in shared tables. It cannot answer for some
        shards only: a failing shard fails the query (503 or 504)."""
        if plan.empty:
            return []
        kind, _ = covered_keys(query)
        owner_ids = sorted({t.owner_id for target in plan.targets for t in target.tables})
        most = self._settings.max_owners
        if len(owner_ids) > most:
            name = coverage.PLURAL[KEY_NAME[kind]]
            raise BadRequest(
                f"backend=fdw reads at most {most} {name} (SHARDLOG_SEARCH__MAX_OWNERS) and "
                f"{len(owner_ids)} hold rows in the window: use backend=fanout",
                "backend",
            )
        tables = [t for target in plan.targets for t in target.tables]
        sources = sql.Coordinated(
            [parent_table(kind, owner) for owner in sorted({t.owner_id for t in tables if t.own})],
            shared_parent(kind),
            sorted({t.owner_id for t in tables if t.shared}),
        )
        if not sources.parents and not sources.shared_owners:
            return []
        text, params = build(sources)
        try:
            return list(
                await self._metadata.fetch(text, *params, timeout=self._settings.shard_timeout_s)
            )
        except (TimeoutError, *DRIVER_ERRORS) as exc:
            error = coordinator_error(
                exc, self._settings.shard_timeout_s, "SHARDLOG_SEARCH__SHARD_TIMEOUT_S"
            )
            if error is None:
                raise
            raise error from exc

    async def _fdw_count(self, query: Query, plan: SearchPlan) -> dict[str, Any]:
        records = await self._coordinator(
            query, plan, lambda sources: sql.fdw_count_sql(query, sources)
        )
        return {
            "value": int(records[0][0]) if records else 0,
            "exact": True,
            "method": "count",
            "bounds": None,
        }

    async def pinned_page(
        self, query: Query, grant: Grant, pin: Pin, after: Position | None, limit: int
    ) -> tuple[list[Row], list[ShardFailure]]:
        """The first ``limit`` rows after ``after`` of those the shards held in ``pin``'s
        snapshots, and the shards that failed: a live tail's replay (router/tail/replay.py)."""
        kind, _ = covered_keys(query)
        plan, owners = await self.plan(query, grant, by_shard_day=True)
        plan, not_pinned = pinned_plan(plan, pin)
        pinning = Pinning(dict(pin.snapshots))
        descending = query.order == "desc"

        def build(shard: str, tables: list[Any]) -> tuple[str, list[Any]]:
            return sql.page_sql(query, tables, shard, after, descending, limit, pinning.of(shard))

        answers, outcome = await self.fan_out(
            plan, build, keep_first(limit, descending), pinning=pinning
        )
        outcome.failures += [ShardFailure(s, f"{NOT_PINNED} here") for s in not_pinned]
        await self.name_owners(query, grant, answers, owners)
        streams = [
            [self._row(record, shard, owners, kind) for record in records]
            for shard, records in answers
        ]
        return merge(streams, descending, limit), outcome.failures

    # --- rows --------------------------------------------------------------------------

    @staticmethod
    def _row(record: asyncpg.Record, shard: str, owners: dict[int, str], kind: str) -> Row:
        row = dict(record)
        row["shard"] = shard
        row[KEY_NAME[kind]] = owners[row["owner_id"]]
        return row

    @staticmethod
    def _position(row: Row) -> Position:
        return Position(row["ts"], row["shard"], row["owner_id"], row["id"])

    @staticmethod
    def _pin(plan: SearchPlan, pinning: Pinning, outcome: Outcome) -> Pin:
        """What the first page of a consistent search pins: the snapshots of the shards that
        answered it; those that did not are missing from the result on every page."""
        failed = {f.shard for f in outcome.failures}
        snapshots = {s: snap for s, snap in pinning.snapshots.items() if s not in failed}
        return Pin(snapshots, frozenset(failed | set(plan.unavailable)))

    @staticmethod
    def item(kind: Kind, row: Row) -> dict[str, Any]:
        """The item of a row: its ref made of the row's own owner id (a page may hold rows of
        several owners), which the item then leaves out."""
        out = {k: v for k, v in row.items() if k != "owner_id"}
        out["ref"] = refs.of_row(kind, row["owner_id"], row)
        return items.shown(out)

    # --- export ------------------------------------------------------------------------

    async def export(
        self, query: Query, format: ExportFormat, grant: Grant
    ) -> AsyncIterator[bytes]:
        """Every match as NDJSON or CSV (router/search/exporter.py)."""
        return await self._exporter.export(query, format, grant)
