"""Turns for the tail streams' work on the event loop: ordering a stream's rows and rendering
them with their cursors costs microseconds per row and stream, so a write read by 1,000
streams is a second of work. Done by 1,000 tasks woken at once, a write's next step would wait
for all of it; here one stream works at a time, a bounded piece each turn, and every turn is
handed on through the event loop, so whatever else is ready (a write) runs between any two
turns. Streams that fall behind meanwhile fill their buffers and are cut with their resume
position (router/tail/ordering.py), which costs the writes nothing.

A stream parks (``Turn.wait``) until it has work (``Turn.want``: rows came) or a time it named
passes (the watermark of its next row, a heartbeat); the pacer grants parked streams their
turn one at a time, in the order they asked. Timers are the pacer's, not one per stream: the
rows of one write fall due in every stream at the same moment.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque

# Timers may fire this much early (uvloop counts milliseconds).
_TIMER_SLACK_S = 0.001


class Pacer:
    def __init__(self) -> None:
        self._ready: deque[Turn] = deque()
        # A turn is held, or its handover is scheduled.
        self._busy = False
        self._timers: list[tuple[float, int, Turn]] = []
        self._timer: asyncio.TimerHandle | None = None
        # When ``_timer`` fires (uvloop's timer handles do not say).
        self._timer_at = 0.0
        self._order = itertools.count()

    def turn(self) -> Turn:
        return Turn(self)

    def __len__(self) -> int:
        """Streams waiting for their turn."""
        return len(self._ready)

    def _enqueue(self, turn: Turn) -> None:
        if turn.queued or turn.closed:
            return
        turn.queued = True
        self._ready.append(turn)
        if not self._busy:
            self._busy = True
            asyncio.get_running_loop().call_soon(self._hand_on)

    def _hand_on(self) -> None:
        while self._ready:
            turn = self._ready.popleft()
            turn.queued = False
            if turn.grant():
                return
        self._busy = False

    def _finished(self) -> None:
        # The next turn starts in the next iteration of the loop: what became ready during
        # this one (a write's next step) runs first.
        asyncio.get_running_loop().call_soon(self._hand_on)

    def _at(self, turn: Turn, when: float) -> None:
        # One timer a turn: a later time waits for the earlier one to pass (see _fire).
        if turn.timer_at is not None and turn.timer_at <= when:
            return
        turn.timer_at = when
        heapq.heappush(self._timers, (when, next(self._order), turn))
        if self._timer is None or when < self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_at = when
            self._timer = asyncio.get_running_loop().call_at(when, self._fire)

    def _fire(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time() + _TIMER_SLACK_S
        while self._timers and self._timers[0][0] <= now:
            when, _, turn = heapq.heappop(self._timers)
            if turn.timer_at != when:
                continue
            turn.timer_at = None
            if not turn.parked or turn.wake_at is None:
                continue
            if turn.wake_at <= now:
                self._enqueue(turn)
            else:
                self._at(turn, turn.wake_at)
        if self._timers:
            self._timer_at = self._timers[0][0]
            self._timer = loop.call_at(self._timer_at, self._fire)


class Turn:
    """One stream's place with the pacer."""

    def __init__(self, pacer: Pacer) -> None:
        self._pacer = pacer
        self.wanted = False
        self.queued = False
        self.parked = False
        self.closed = False
        self.wake_at: float | None = None
        # The time of this turn's entry in the pacer's timers, if any.
        self.timer_at: float | None = None
        self._granted: asyncio.Future[None] | None = None

    def want(self) -> None:
        """The stream has work: its turn comes (now, if it is parked; else when it parks)."""
        self.wanted = True
        if self.parked:
            self._pacer._enqueue(self)

    def grant(self) -> bool:
        future = self._granted
        if not self.parked or future is None or future.done():
            return False
        self.parked = False
        future.set_result(None)
        return True

    async def wait(self, wake_at: float | None) -> None:
        """Parks until this stream's turn: when it has work, or at ``wake_at`` (loop time).
        The caller holds the turn until ``done``."""
        future = asyncio.get_running_loop().create_future()
        self._granted = future
        self.parked = True
        self.wake_at = wake_at
        if self.wanted:
            self._pacer._enqueue(self)
        elif wake_at is not None:
            self._pacer._at(self, wake_at)
        try:
            await future
        except asyncio.CancelledError:
            self.parked = False
            if future.done() and not future.cancelled():
                self._pacer._finished()
            raise
        self.wanted = False

    def done(self) -> None:
        self._pacer._finished()

    def close(self) -> None:
        self.closed = True
        self.parked = False
