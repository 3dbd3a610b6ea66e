"""Streaming answers bound to their token's lifetime: a stream (a live tail, an export, a
report) takes a lease on its token (router/auth/leases.py) before it opens, and its answer
ends when the lease does (router/http/leased.py)."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from router.auth.leases import Lease
from router.auth.registry import Caller
from router.runtime import Runtime

T = TypeVar("T")


async def opened(runtime: Runtime, caller: Caller, opening: Awaitable[T]) -> tuple[T, Lease]:
    """What ``opening`` returns (a stream's first reads, a report's groups) and the lease the
    stream goes on with; a 401 naming the reason when the token lapses first."""
    lease = runtime.auth.lease(caller)
    try:
        return await lease.bound(opening), lease
    except BaseException:
        lease.close()
        raise
