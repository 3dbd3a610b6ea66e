"""How long an open stream (a live tail, an export, a report) may go on: as long as the token
that opened it is neither revoked, expired, removed nor narrowed. A stream takes a ``Lease``
on its token; the token registry ends the leases of a token when its reload shows such a
change (the catalog's NOTIFY reaches every router within milliseconds), and at the token's
expiry by a timer, so that no stream outlives its token."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge

from router import clock
from router.auth.scopes import PREFIX_OF_KIND, Grant
from router.errors import Unauthorized

T = TypeVar("T")
Reason = Literal["revoked", "expired", "removed", "narrowed"]


@dataclass(frozen=True, slots=True)
class TokenState:
    """What the registry knows of a token now."""

    grant: Grant
    revoked: bool
    expires: float | None  # epoch seconds


def _reaches(wider: tuple[str, ...], narrower: tuple[str, ...]) -> bool:
    """Whether prefixes ``wider`` reach every key ``narrower`` does (no prefix: every key)."""
    if not wider:
        return True
    if not narrower:
        return False
    return all(any(p.startswith(q) for q in wider) for p in narrower)


def narrowing(held: Grant, now: Grant) -> str | None:
    """What ``now`` no longer allows of ``held`` (a scope or a prefix taken away, another
    tenant), or None when it allows all of it."""
    if now.tenant != held.tenant or (held.any_tenant and not now.any_tenant):
        return f"it now belongs to tenant {now.tenant}"
    lost = sorted(held.scopes - now.scopes)
    if lost:
        return f"it no longer holds {', '.join(lost)}"
    for kind, prefix in PREFIX_OF_KIND.items():
        if not _reaches(now.prefixes(kind), held.prefixes(kind)):
            shown = ", ".join(prefix + p for p in now.prefixes(kind))
            return f"its keys are narrowed to {shown}"
    return None


def ending(
    token_id: str, held: Grant, state: TokenState | None, now: float
) -> tuple[Reason, str] | None:
    """Why a stream opened with ``held`` must end (a reason and a message), or None. The
    messages of a revoked and an expired token are a request's 401 (router/auth/registry.py)."""
    if state is None:
        return "removed", f"token {token_id} no longer exists"
    if state.revoked:
        return "revoked", f"token {token_id} was revoked"
    if state.expires is not None and state.expires <= now:
        return "expired", f"token {token_id} has expired"
    narrowed = narrowing(held, state.grant)
    if narrowed is not None:
        return "narrowed", f"token {token_id} was narrowed: {narrowed}"
    return None


class Lease:
    """One stream's hold on its token. ``ended`` is set once, with ``reason`` and ``message``."""

    def __init__(
        self, token_id: str | None, grant: Grant, on_close: Callable[[Lease], None]
    ) -> None:
        self.token_id = token_id
        self.grant = grant
        self.ended = asyncio.Event()
        self.reason: Reason | None = None
        self.message = ""
        self._on_close = on_close

    def end(self, reason: Reason, message: str) -> None:
        if self.reason is None:
            self.reason, self.message = reason, message
            self.ended.set()

    def close(self) -> None:
        """The stream is over: the registry forgets the lease (again: nothing)."""
        self._on_close(self)

    def error(self) -> Unauthorized:
        return Unauthorized(self.message, "authorization")

    async def bound(self, work: Awaitable[T]) -> T:
        """``work`` (a stream's opening: a report's computation, an export's first reads),
        cancelled with a 401 naming the reason when the lease ends first."""
        task = asyncio.ensure_future(work)
        if not await unless(task, self.ended.wait()):
            raise self.error()
        return task.result()


async def unless(work: asyncio.Future[T], lapse: Awaitable[object]) -> bool:
    """Waits for ``work`` unless ``lapse`` comes first: then ``work`` is cancelled (and waited
    for). True when ``work`` finished by itself (its result or exception is there to take)."""
    waiter = asyncio.ensure_future(lapse)
    either: set[asyncio.Future[Any]] = {work, waiter}
    try:
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        if not work.done():
            work.cancel()
            await asyncio.gather(work, return_exceptions=True)
    return not work.cancelled()


class Leases:
    """The open leases of a router's streams, by token, and a timer per token at its expiry."""

    def __init__(self, metrics: CollectorRegistry | None = None) -> None:
        self._by_token: dict[str, weakref.WeakSet[Lease]] = {}
        self._timers: dict[str, tuple[float, asyncio.TimerHandle]] = {}
        self._ended = Counter(
            "shardlog_streams_ended",
            "Open streams (tails, exports, reports) ended because their token was revoked, "
            "expired, removed or narrowed",
            ["reason"],
            registry=metrics,
        )
        self._open = Gauge(
            "shardlog_stream_leases",
            "Open streams bound to their token's lifetime",
            registry=metrics,
        )
        self._open.set_function(self.count)

    def take(self, token_id: str | None, grant: Grant, state: TokenState | None) -> Lease:
        """A lease for a stream opened now with ``grant`` (ended at once when ``state`` says
        so; never ended for the open mode's caller, which has no token)."""
        lease = Lease(token_id, grant, self._forget)
        if token_id is None:
            return lease
        self._by_token.setdefault(token_id, weakref.WeakSet()).add(lease)
        self._review(token_id, state)
        return lease

    def review(self, state_of: Callable[[str], TokenState | None]) -> None:
        """After the tokens were reloaded: end the leases their tokens no longer allow."""
        for token_id in list(self._by_token):
            self._review(token_id, state_of(token_id))

    def count(self) -> int:
        return sum(len(leases) for leases in self._by_token.values())

    def _review(self, token_id: str, state: TokenState | None) -> None:
        leases = self._by_token.get(token_id)
        if not leases:
            self._drop(token_id)
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        wall = clock.time()
        for lease in list(leases):
            if lease.reason is not None:
                continue
            why = ending(token_id, lease.grant, state, wall)
            if why is not None:
                lease.end(*why)
        expires = None if state is None else state.expires
        armed = self._timers.get(token_id)
        if not leases or expires is None:
            self._drop(token_id)
        elif armed is None or armed[0] != expires:
            self._drop(token_id)
            handle = loop.call_at(now + max(0.0, expires - wall), self._expire, token_id, state)
            self._timers[token_id] = (expires, handle)

    def _expire(self, token_id: str, state: TokenState | None) -> None:
        self._timers.pop(token_id, None)
        self._review(token_id, state)

    def _forget(self, lease: Lease) -> None:
        token_id = lease.token_id
        leases = None if token_id is None else self._by_token.get(token_id)
        if token_id is None or leases is None or lease not in leases:
            return
        leases.discard(lease)
        if lease.reason is not None:
            self._ended.labels(lease.reason).inc()
        if not leases:
            self._drop(token_id)

    def _drop(self, token_id: str) -> None:
        armed = self._timers.pop(token_id, None)
        if armed is not None:
            armed[1].cancel()
        if not self._by_token.get(token_id):
            self._by_token.pop(token_id, None)
