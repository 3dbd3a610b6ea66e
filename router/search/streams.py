"""Statements streamed from every shard of a plan at once: one read-only transaction and one
server-side cursor per shard, its first batch read under a deadline (a shard that fails or is
late is a ShardFailure: the caller answers partially or refuses), the rest read a batch at a
time as the caller merges (exports: with the next batch read ahead while the caller merges
this one). Reports and exports read the shards this way."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from router.db.failures import DRIVER_ERRORS, describe, is_transient
from router.db.names import DayTable
from router.db.pools import ShardPools
from router.errors import BadRequest, GatewayTimeout, Unavailable
from router.routing.search_plan import SearchPlan, ShardTarget

RETRY_PAUSE_S = 0.2
Batches = AsyncIterator[Sequence[Any]]
# A shard's statement over some of its day tables: (shard, tables) -> (text, parameters).
Statement = Callable[[str, list[DayTable]], tuple[str, list[Any]]]
# Those of a shard's tables that still exist (retention may drop one after planning).
Existing = Callable[[str, list[DayTable]], Any]


@dataclass
class ShardFailure:
    shard: str
    reason: str
    timed_out: bool = False


def refuse_partial(failures: list[ShardFailure], what: str) -> None:
    """The answer when shards failed and the caller asked for no partial one: 504 if one was
    late, else 503."""
    detail = "; ".join(f"{f.shard}: {f.reason}" for f in failures)
    if any(f.timed_out for f in failures):
        raise GatewayTimeout(f"shards did not answer in time: {detail}")
    raise Unavailable(f"shards could not be {what}: {detail}", retry_after_s=1)


class ShardCursors:
    def __init__(
        self,
        pools: ShardPools,
        existing: Existing,
        timeout_s: float,
        fetch_rows: int,
        timeout_setting: str,
        *,
        read_ahead: bool = False,
    ) -> None:
        self._pools = pools
        self._existing = existing
        self._timeout_s = timeout_s
        self._fetch_rows = fetch_rows
        self._timeout_setting = timeout_setting
        self._read_ahead = read_ahead

    async def open_all(
        self, plan: SearchPlan, statement: Statement, stack: contextlib.AsyncExitStack
    ) -> tuple[list[tuple[str, Batches]], list[ShardFailure]]:
        """(shard, batches) of every target that answered, and a failure of every one that did
        not; connections are released when ``stack`` closes."""
        failures = [ShardFailure(s, "marked down") for s in plan.unavailable]
        opened = await asyncio.gather(
            *(self._open_retrying(statement, target) for target in plan.targets),
            return_exceptions=True,
        )
        streams: list[tuple[str, Batches]] = []
        problem: BaseException | None = None
        for target, result in zip(plan.targets, opened, strict=True):
            if isinstance(result, tuple):
                exits, stream = result
                stack.push_async_callback(exits.aclose)
                streams.append((target.shard, stream))
            elif isinstance(result, TimeoutError | asyncpg.QueryCanceledError):
                reason = f"no answer within {self._timeout_s:g}s ({self._timeout_setting})"
                failures.append(ShardFailure(target.shard, reason, timed_out=True))
            elif isinstance(result, DRIVER_ERRORS) and is_transient(result):
                failures.append(ShardFailure(target.shard, describe(result)))
            else:
                problem = problem or result
        if problem is not None:
            if isinstance(problem, asyncpg.InvalidRegularExpressionError):
                raise BadRequest(f"invalid regular expression: {problem}", "q")
            raise problem
        return streams, failures

    async def _open_retrying(
        self, statement: Statement, target: ShardTarget
    ) -> tuple[contextlib.AsyncExitStack, Batches]:
        """One retry on a broken connection (a shard in a failover), and one on a day table
        dropped since it was planned (retention): without it."""
        tables = list(target.tables)
        for attempt in range(3):
            try:
                return await self._open(statement, target.shard, tables, primary=attempt > 0)
            except asyncpg.UndefinedTableError:
                if attempt == 2:
                    raise
                tables = await self._existing(target.shard, tables)
            except DRIVER_ERRORS as exc:
                late = isinstance(exc, asyncpg.QueryCanceledError | TimeoutError)
                if late or not is_transient(exc) or attempt == 2:
                    raise
                await asyncio.sleep(RETRY_PAUSE_S)
        raise AssertionError("unreachable")

    async def _open(
        self, statement: Statement, shard: str, tables: list[DayTable], primary: bool
    ) -> tuple[contextlib.AsyncExitStack, Batches]:
        exits = contextlib.AsyncExitStack()
        try:
            if not tables:
                return exits, _empty()
            pool = self._pools.reader(shard, primary=primary)
            connection = await exits.enter_async_context(pool.acquire(timeout=self._timeout_s))
            await exits.enter_async_context(connection.transaction(readonly=True))
            # Every row is read: the plan that is cheapest in total, not the one whose first
            # rows come soonest (the default for cursors, 0.1, picked index scans that visit
            # the heap in random order over a whole day table).
            await connection.execute("SET LOCAL cursor_tuple_fraction = 1.0")
            text, params = statement(shard, tables)
            ahead = _ReadAhead() if self._read_ahead else None
            if ahead is not None:
                # Before the transaction ends: no fetch may still run on the connection then.
                exits.push_async_callback(ahead.cancel)
            return exits, await self.stream(connection, text, params, ahead)
        except BaseException:
            await exits.aclose()
            raise

    async def stream(
        self, connection: Any, text: str, params: list[Any], ahead: _ReadAhead | None = None
    ) -> Batches:
        """``text`` under a cursor on ``connection`` (in a transaction); its first batch is
        read before this returns, under the deadline. With ``ahead``, each next batch is
        fetched while the caller works on the one before (the shard renders rows while the
        router merges)."""
        timeout = self._timeout_s
        cursor = await connection.cursor(text, *params, timeout=timeout)
        first = await cursor.fetch(self._fetch_rows, timeout=timeout)
        return _batches(cursor, first, self._fetch_rows, timeout, ahead)


class Buffered:
    """A stream of batches and what is left of its current batch, for merges that take a
    round at a time."""

    def __init__(self, batches: Batches) -> None:
        self.batches = batches
        self.rows: Sequence[Any] = ()
        self.exhausted = False

    async def refill(self) -> None:
        # Not anext(batches, default): CPython 3.11 raises SystemError from it when the
        # iterator ends inside asyncio.gather.
        try:
            self.rows = await self.batches.__anext__()
        except StopAsyncIteration:
            self.rows = ()
        self.exhausted = not self.rows


async def _empty() -> Batches:
    return
    yield


class _ReadAhead:
    """The fetch of a cursor's next batch, running while its stream's consumer works."""

    def __init__(self) -> None:
        self._task: asyncio.Future[list[Any]] | None = None

    def start(self, fetch: Awaitable[list[Any]]) -> None:
        self._task = asyncio.ensure_future(fetch)

    async def take(self) -> list[Any]:
        task = self._task
        assert task is not None
        # Shielded: a reader cancelled here leaves the fetch to cancel(), which the stream's
        # exit awaits before its transaction ends.
        batch = await asyncio.shield(task)
        self._task = None
        return batch

    async def cancel(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def _batches(
    cursor: Any, first: list[Any], step: int, deadline_s: float, ahead: _ReadAhead | None
) -> Batches:
    batch = first
    while batch:
        more = len(batch) == step
        if more and ahead is not None:
            ahead.start(cursor.fetch(step, timeout=deadline_s))
        yield batch
        if not more:
            return
        try:
            if ahead is not None:
                batch = await ahead.take()
            else:
                batch = await cursor.fetch(step, timeout=deadline_s)
        except (TimeoutError, *DRIVER_ERRORS) as exc:
            # The answer has begun: the caller ends the stream with this error as its last line.
            message = f"a shard failed in the middle of the stream: {describe(exc)}"
            raise Unavailable(message) from exc
