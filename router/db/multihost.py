"""Connecting through a multi-host DSN (a shard's Patroni nodes) when one of its hosts is gone.

asyncpg tries the hosts one after the other under one timeout for them all: a host that is
powered off or hung (no refusal, no answer: its address unanswered, or a TCP handshake and then
silence) spends the whole timeout, and the next host, the new primary after a failover, is
never tried. libpq gives each host the whole ``connect_timeout`` of its own instead. Here too,
and more: a host silent for ``STAGGER_S`` has the next one tried beside it (the first usable
connection wins, the others are closed), and the host that gave the last connection is tried
first, so that once a connection went through, the next ones do not wait for a dead host."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import asyncpg
from asyncpg.connect_utils import SessionAttribute

from router.db.dsn import parse_dsn
from router.db.failures import DRIVER_ERRORS

# A PostgreSQL server answers a connection within milliseconds on a local network; one that has
# not answered in this time is tried beside the next host, not before it.
STAGGER_S = 0.5

Host = tuple[str, int]


class HostPicker:
    """The ``connect`` of one pool (or one caller): remembers which host answered last."""

    def __init__(self) -> None:
        self._last: Host | None = None

    def order(self, hosts: Sequence[Host]) -> list[Host]:
        """The DSN's order, with the host that answered last moved to the front."""
        if self._last not in hosts:
            return list(hosts)
        assert self._last is not None
        return [self._last, *(h for h in hosts if h != self._last)]

    async def connect(self, dsn: str | None = None, **kwargs: Any) -> asyncpg.Connection:
        """asyncpg.connect's signature (a pool's ``connect``); ``timeout`` is per host."""
        assert dsn is not None
        parsed = parse_dsn(dsn)
        if len(parsed.hosts) < 2:
            return await asyncpg.connect(dsn, **kwargs)
        target = kwargs.pop("target_session_attrs", None) or parsed.params.get(
            "target_session_attrs", "any"
        )
        hosts = self.order(parsed.hosts)

        def attempt(wanted: str) -> Callable[[Host], Awaitable[asyncpg.Connection]]:
            async def one(host: Host) -> asyncpg.Connection:
                return await asyncpg.connect(
                    dsn,
                    host=host[0],
                    port=host[1],
                    target_session_attrs=SessionAttribute(wanted),
                    **kwargs,
                )

            return one

        if str(target) == "prefer-standby":
            try:
                host, connection = await first_of(hosts, attempt("standby"))
            except DRIVER_ERRORS:
                host, connection = await first_of(hosts, attempt("any"))
        else:
            host, connection = await first_of(hosts, attempt(str(target)))
        self._last = host
        return connection


async def first_of(
    hosts: Sequence[Host], attempt: Callable[[Host], Awaitable[asyncpg.Connection]]
) -> tuple[Host, asyncpg.Connection]:
    """The first host whose ``attempt`` succeeds. Hosts start in order, the next one as soon as
    an attempt fails or after ``STAGGER_S`` without an answer; the other attempts are cancelled
    and any connection they made is closed. Raises the last error when every host failed."""

    async def tagged(host: Host) -> tuple[Host, asyncpg.Connection]:
        return host, await attempt(host)

    waiting = list(hosts)
    pending: set[asyncio.Task[tuple[Host, asyncpg.Connection]]] = set()
    last_error: BaseException | None = None
    won: tuple[Host, asyncpg.Connection] | None = None
    try:
        while won is None and (waiting or pending):
            if waiting:
                pending.add(asyncio.ensure_future(tagged(waiting.pop(0))))
            done, pending = await asyncio.wait(
                pending,
                timeout=STAGGER_S if waiting else None,
                return_when=asyncio.FIRST_COMPLETED,
            )
            for task in done:
                error = task.exception()
                if error is not None:
                    last_error = error
                elif won is None:
                    won = task.result()
                else:
                    task.result()[1].terminate()
    finally:
        for task in pending:
            task.cancel()
        for outcome in await asyncio.gather(*pending, return_exceptions=True):
            if isinstance(outcome, tuple):
                outcome[1].terminate()
    if won is not None:
        return won
    assert last_error is not None
    raise last_error


__all__ = ["STAGGER_S", "HostPicker", "first_of"]
