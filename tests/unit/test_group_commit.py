"""router/ingest/group_commit: which parts make a group, and that every waiting part is
settled by its group's outcome (the commit itself is the writer's, tested against the cluster
in tests/integration/test_group_commit.py)."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator
from datetime import date

import pytest

from router.db.names import day_table
from router.ingest.group_commit import GroupCommit, Pending, take
from router.ingest.writer import Part

TABLE = day_table("audit", 1, date(2026, 11, 25))


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def pending(loop: asyncio.AbstractEventLoop, rows: int, number: int) -> Pending:
    part = Part(f"p{number}", TABLE, [(number,)] * rows, "shard1")
    return Pending(part, "key", loop.create_future())


def test_a_group_takes_parts_in_order_while_they_fit(loop: asyncio.AbstractEventLoop) -> None:
    queue = deque(pending(loop, rows, n) for n, rows in enumerate((3, 4, 2, 5)))
    assert [p.part.id for p in take(queue, 9)] == ["p0", "p1", "p2"]
    assert [p.part.id for p in queue] == ["p3"]


def test_a_part_larger_than_the_budget_is_a_group_of_its_own(
    loop: asyncio.AbstractEventLoop,
) -> None:
    queue = deque(pending(loop, rows, n) for n, rows in enumerate((50, 1)))
    assert [p.part.id for p in take(queue, 10)] == ["p0"]
    assert [p.part.id for p in take(queue, 10)] == ["p1"]
    assert not queue


def test_a_group_stops_at_the_first_part_that_does_not_fit(
    loop: asyncio.AbstractEventLoop,
) -> None:
    queue = deque(pending(loop, rows, n) for n, rows in enumerate((4, 7, 1)))
    assert [p.part.id for p in take(queue, 10)] == ["p0"]  # never reordered


def test_parts_queued_during_a_commit_share_the_next_one() -> None:
    groups: list[list[str]] = []
    release = asyncio.Event()

    async def commit(shard: str, group: list[Pending]) -> None:
        groups.append([p.part.id for p in group])
        if len(groups) == 1:
            await release.wait()
        for p in group:
            p.done.set_result(p.part.id != "p2")

    async def go() -> list[bool]:
        committer = GroupCommit(commit, 0.0, 100)
        first = asyncio.create_task(committer.write(Part("p0", TABLE, [()], "s"), "s", "k"))
        await asyncio.sleep(0)
        others = [
            asyncio.create_task(committer.write(Part(f"p{n}", TABLE, [()], "s"), "s", "k"))
            for n in (1, 2, 3)
        ]
        await asyncio.sleep(0)
        release.set()
        outcomes = await asyncio.gather(first, *others)
        await committer.close()
        return outcomes

    assert asyncio.run(go()) == [True, True, False, True]
    assert groups == [["p0"], ["p1", "p2", "p3"]]


def test_shards_commit_apart_and_a_failed_commit_fails_only_its_parts() -> None:
    async def commit(shard: str, group: list[Pending]) -> None:
        if shard == "bad":
            raise OSError("connection refused")
        for p in group:
            p.done.set_result(True)

    async def go() -> list[object]:
        committer = GroupCommit(commit, 0.0, 100)
        writes = [
            committer.write(Part(f"p{n}", TABLE, [()], shard), shard, "k")
            for n, shard in enumerate(("good", "bad", "good"))
        ]
        outcomes = await asyncio.gather(*writes, return_exceptions=True)
        await committer.close()
        return outcomes

    good, bad, again = asyncio.run(go())
    assert good is True and again is True
    assert isinstance(bad, OSError)


def test_audit_and_flow_parts_of_one_shard_never_share_a_commit() -> None:
    groups: list[set[str]] = []
    flows = day_table("flow", 1, date(2026, 11, 25))

    async def commit(shard: str, group: list[Pending]) -> None:
        groups.append({p.part.table.kind for p in group})
        for p in group:
            p.done.set_result(True)

    async def go() -> None:
        committer = GroupCommit(commit, 0.0, 100)
        await asyncio.gather(
            *(
                committer.write(Part(f"p{n}", table, [()], "s"), "s", "k")
                for n, table in enumerate((TABLE, flows, TABLE, flows))
            )
        )

    asyncio.run(go())
    assert sorted(sorted(kinds) for kinds in groups) == [["audit"], ["flow"]]


def test_a_commit_that_leaves_a_part_unsettled_fails_it() -> None:
    async def commit(shard: str, group: list[Pending]) -> None:
        return None

    async def go() -> BaseException | bool:
        committer = GroupCommit(commit, 0.0, 100)
        (outcome,) = await asyncio.gather(
            committer.write(Part("p", TABLE, [()], "s"), "s", "k"), return_exceptions=True
        )
        return outcome

    assert isinstance(asyncio.run(go()), RuntimeError)


def test_a_wait_lets_a_group_fill() -> None:
    groups: list[int] = []

    async def commit(shard: str, group: list[Pending]) -> None:
        groups.append(len(group))
        for p in group:
            p.done.set_result(True)

    async def go() -> None:
        committer = GroupCommit(commit, 0.05, 100)
        first = asyncio.create_task(committer.write(Part("a", TABLE, [()], "s"), "s", "k"))
        await asyncio.sleep(0.01)
        await asyncio.gather(first, committer.write(Part("b", TABLE, [()], "s"), "s", "k"))

    asyncio.run(go())
    assert groups == [2]
