"""Group commit across requests: small parts bound for one shard, of one request or of
several, queue there (audit and flows apart); one drain per queue takes what queued (up to a
row budget) and writes it in one shared transaction, so that concurrent small requests share a
commit (its WAL flush, its round trips for BEGIN and COMMIT). Each part is acknowledged only
after that commit.

With no wait (SHARDLOG_INGEST__GROUP_COMMIT_WAIT_MS = 0) a group is whatever queued while the
previous commit ran: a lone request is written at once, in a group of one. How a group is
written (and what happens when one of its parts fails) is the writer's: router/ingest/writer.py.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from router.ingest.writer import Part


@dataclass
class Pending:
    """A part waiting for its group's commit; ``done`` answers whether it was written now
    (False: an earlier attempt committed it) or raises why not."""

    part: Part
    request_key: str
    done: asyncio.Future[bool] = field(repr=False)


def take(queue: deque[Pending], max_rows: int) -> list[Pending]:
    """The next group: parts from the front of ``queue`` while their rows fit ``max_rows``;
    always at least one (a part is never split), in the order they came."""
    group = [queue.popleft()]
    rows = len(group[0].part.rows)
    while queue and rows + len(queue[0].part.rows) <= max_rows:
        rows += len(queue[0].part.rows)
        group.append(queue.popleft())
    return group


# Writes one group in one transaction; settles every part's ``done``.
Commit = Callable[[str, list[Pending]], Awaitable[None]]


class GroupCommit:
    def __init__(self, commit: Commit, wait_s: float, max_rows: int) -> None:
        self._commit = commit
        self._wait_s = wait_s
        self._max_rows = max_rows
        # By shard and kind: audit and flow parts may commit with different
        # synchronous_commit (router/catalog/snapshot.py), so they never share a transaction.
        self._queues: dict[tuple[str, str], deque[Pending]] = {}
        self._drains: dict[tuple[str, str], asyncio.Task[None]] = {}

    async def write(self, part: Part, shard: str, request_key: str) -> bool:
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        where = (shard, part.table.kind)
        self._queues.setdefault(where, deque()).append(Pending(part, request_key, done))
        if where not in self._drains:
            self._drains[where] = asyncio.create_task(self._drain(where))
        # A caller cancelled meanwhile does not stop the group: its part is written (or not)
        # with the others, as a part that runs to its end.
        return await asyncio.shield(done)

    async def _drain(self, where: tuple[str, str]) -> None:
        shard, queue = where[0], self._queues[where]
        try:
            while queue:
                if self._wait_s > 0:
                    await asyncio.sleep(self._wait_s)
                group = take(queue, self._max_rows)
                try:
                    await self._commit(shard, group)
                except BaseException as exc:  # settle every waiting part, then carry on
                    for pending in group:
                        if not pending.done.done():
                            pending.done.set_exception(exc)
                    if not isinstance(exc, Exception):
                        raise
                finally:
                    for pending in group:
                        if not pending.done.done():
                            pending.done.set_exception(RuntimeError("group left a part unsettled"))
        finally:
            del self._drains[where]
            while queue:  # only when the drain itself was cancelled (shutdown)
                queue.popleft().done.cancel()

    async def close(self) -> None:
        """Let every queued group finish (at shutdown)."""
        while self._drains:
            await asyncio.gather(*self._drains.values(), return_exceptions=True)
