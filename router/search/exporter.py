"""Runs an export: plan the search, open every shard's stream before the answer begins (a
failing shard or a bad pattern is an error then, never a partial export), and hand the streams
to router/search/export.py's merge. Each shard renders its rows' lines (router/search/lines.py)
and reads them through one cursor, the next batch read ahead while the router merges; a shard
with more day tables than one statement may keep locked reads keyset pages instead, each by
statements of at most TABLES_PER_STATEMENT tables."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from router.auth.scopes import Grant
from router.db.failures import DRIVER_ERRORS, describe
from router.db.pools import ShardPools
from router.errors import Unavailable
from router.routing.search_plan import SearchPlan, ShardTarget
from router.search import export, lines, sql
from router.search.cursor import Position
from router.search.lines import ExportFormat
from router.search.merge import keep_first
from router.search.query import AuditQuery, FlowQuery, covered_keys
from router.search.streams import Batches, ShardCursors, ShardFailure, refuse_partial
from router.settings import SearchSettings

if TYPE_CHECKING:
    from router.search.service import SearchService

Query = AuditQuery | FlowQuery


class Exporter:
    def __init__(self, search: SearchService, pools: ShardPools, settings: SearchSettings) -> None:
        self._search = search
        self._pools = pools
        self._settings = settings

    async def export(
        self, query: Query, format: ExportFormat, grant: Grant
    ) -> AsyncIterator[bytes]:
        """The export's body, in chunks; its shards' streams are open when this returns."""
        plan, owners = await self._search.plan(query, grant, by_shard_day=True)
        kind, _ = covered_keys(query)
        descending = query.order == "desc"
        settings = self._settings
        cursors = ShardCursors(
            self._pools,
            self._search.existing_tables,
            settings.shard_timeout_s,
            settings.export_page_rows,
            "SHARDLOG_SEARCH__SHARD_TIMEOUT_S",
            read_ahead=True,
        )

        def statement(shard: str, tables: list[Any]) -> tuple[str, list[Any]]:
            columns = lines.columns(kind, format, shard, owners)
            return sql.export_sql(query, tables, descending, columns, lines.OUTPUT)

        one_cursor = tuple(t for t in plan.targets if len(t.batches()) == 1)
        paged = tuple(t for t in plan.targets if len(t.batches()) > 1)
        stack = contextlib.AsyncExitStack()
        try:
            streams, failures = await cursors.open_all(
                SearchPlan(one_cursor, plan.unavailable), statement, stack
            )
            pages, late = await self._open_pages(query, format, owners, paged)
            if failures or late:
                refuse_partial(failures + late, "searched")
        except BaseException:
            await stack.aclose()
            raise
        head = lines.csv_header(kind).encode() if format == "csv" else b""
        return _released(stack, export.write(streams + pages, descending, format, head))

    async def _open_pages(
        self,
        query: Query,
        format: ExportFormat,
        owners: dict[int, str],
        targets: tuple[ShardTarget, ...],
    ) -> tuple[list[tuple[str, Batches]], list[ShardFailure]]:
        """The first page of each target's rows read, and the rest to come, page by page."""
        step = self._settings.export_page_rows
        descending = query.order == "desc"
        kind, _ = covered_keys(query)

        def page_of(shard: str, after: Position | None) -> Any:
            columns = lines.columns(kind, format, shard, owners)

            def page(tables: list[Any]) -> tuple[str, list[Any]]:
                return sql.page_sql(query, tables, shard, after, descending, step, columns=columns)

            return page

        answers, outcome = await self._search.fan_out(
            SearchPlan(targets),
            lambda shard, tables: page_of(shard, None)(tables),
            keep_first(step, descending),
        )
        target_of = {t.shard: t for t in targets}

        async def pages(target: ShardTarget, rows: list[Any]) -> Batches:
            while rows:
                yield rows
                if len(rows) < step:
                    return
                last = rows[-1]
                after = Position(last["ts"], target.shard, last["owner_id"], last["id"])
                try:
                    rows = await self._search.fetch_target(
                        target, page_of(target.shard, after), keep_first(step, descending)
                    )
                except (TimeoutError, *DRIVER_ERRORS) as exc:
                    # The answer has begun: the stream ends with this error as its last line.
                    message = f"a shard failed in the middle of the stream: {describe(exc)}"
                    raise Unavailable(message) from exc

        streams = [(shard, pages(target_of[shard], rows)) for shard, rows in answers]
        return streams, outcome.failures


async def _released(
    stack: contextlib.AsyncExitStack, chunks: AsyncIterator[bytes]
) -> AsyncIterator[bytes]:
    async with stack:
        async for chunk in chunks:
            yield chunk
