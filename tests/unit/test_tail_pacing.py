"""The pacer of the tail streams (router/tail/pacing.py): one turn at a time, in the order
asked, each handed on through the event loop so that other work runs between two turns;
timers wake parked streams."""

from __future__ import annotations

import asyncio

from router.tail.pacing import Pacer, Turn


async def _stream(name: str, turn: Turn, log: list[str], turns: int) -> None:
    for n in range(turns):
        await turn.wait(None)
        log.append(f"{name}{n}")
        if n + 1 < turns:
            turn.want()
        turn.done()


async def test_streams_take_turns_with_other_work_between() -> None:
    pacer = Pacer()
    log: list[str] = []
    turns = [pacer.turn() for _ in range(3)]
    tasks = [
        asyncio.create_task(_stream(name, turn, log, 2))
        for name, turn in zip("abc", turns, strict=True)
    ]
    await asyncio.sleep(0)
    for turn in turns:
        turn.want()

    async def other_work() -> None:
        # Something else ready on the loop (a write's next step) at every iteration.
        while sum(entry != "w" for entry in log) < 6:
            log.append("w")
            await asyncio.sleep(0)

    await asyncio.gather(other_work(), *tasks)
    streams = [entry for entry in log if entry != "w"]
    assert streams == ["a0", "b0", "c0", "a1", "b1", "c1"]
    # No two turns back to back: the other work ran between each.
    assert all(log[n - 1] == "w" for n, e in enumerate(log) if e != "w" and n > 0)


async def test_a_parked_stream_wakes_at_its_time_or_when_it_has_work() -> None:
    pacer = Pacer()
    loop = asyncio.get_running_loop()
    timed, wanted = pacer.turn(), pacer.turn()
    started = loop.time()
    woken: list[str] = []

    async def park(name: str, turn: Turn, at: float | None) -> None:
        await turn.wait(at)
        woken.append(name)
        turn.done()

    first = asyncio.create_task(park("timed", timed, started + 0.05))
    second = asyncio.create_task(park("wanted", wanted, started + 60))
    await asyncio.sleep(0)
    wanted.want()
    await asyncio.wait_for(asyncio.gather(first, second), 5)
    assert woken == ["wanted", "timed"]
    assert loop.time() - started >= 0.04


async def test_a_cancelled_stream_hands_its_turn_on() -> None:
    pacer = Pacer()
    holder, waiting, cancelled = pacer.turn(), pacer.turn(), pacer.turn()
    got: list[str] = []

    async def one(name: str, turn: Turn) -> None:
        await turn.wait(None)
        got.append(name)
        turn.done()

    tasks = {
        n: asyncio.create_task(one(n, t))
        for n, t in (("holder", holder), ("cancelled", cancelled), ("waiting", waiting))
    }
    await asyncio.sleep(0)
    holder.want()
    cancelled.want()
    waiting.want()
    tasks["cancelled"].cancel()
    await asyncio.wait_for(asyncio.gather(tasks["holder"], tasks["waiting"]), 5)
    assert got == ["holder", "waiting"]
