"""Which driver errors mean "this shard could not take the write right now", by SQLSTATE class
and exception type, never by message text."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import asyncpg

from router.errors import BadRequest, GatewayTimeout, ShardlogError, Unavailable

# 08 connection exception, 53 insufficient resources, 57 operator intervention (admin shutdown,
# cannot connect now, statement timeout), 40 transaction rollback (serialization, deadlock),
# 25 read-only transaction (a standby after failover).
_TRANSIENT_CLASSES = ("08", "53", "57", "40", "25")
_BROKEN = (OSError, TimeoutError, asyncpg.InterfaceError, asyncpg.InternalClientError)


def is_transient(exc: BaseException) -> bool:
    # InternalClientError: a connection asyncpg gave up on mid-protocol (a shard stopping during
    # COPY), or a multi-host DSN none of whose hosts is what its target_session_attrs asks for
    # (a standby reader while the only standby is the node a failover lost): another attempt,
    # or the primary, serves it.
    if isinstance(
        exc, (OSError, TimeoutError, asyncpg.InterfaceError, asyncpg.InternalClientError)
    ):
        return True
    if isinstance(exc, asyncpg.PostgresError):
        state = getattr(exc, "sqlstate", None) or ""
        return state[:2] in _TRANSIENT_CLASSES
    return False


def describe(exc: BaseException) -> str:
    state = getattr(exc, "sqlstate", None)
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"{type(exc).__name__}{f' [{state}]' if state else ''}: {text}"


# What a driver call may raise when a server stops, restarts or switches over mid-call;
# asyncpg's InternalClientError is not an InterfaceError (seen when a shard stops during COPY).
DRIVER_ERRORS = (
    OSError,
    TimeoutError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
)


@contextmanager
def unavailable_when_unreachable(what: str, retry_after_s: int) -> Iterator[None]:
    """Turn a transient driver error inside the block into a 503 naming ``what``."""
    try:
        yield
    except DRIVER_ERRORS as exc:
        if not is_transient(exc):
            raise
        raise Unavailable(
            f"{what} unreachable: {describe(exc)}", retry_after_s=retry_after_s
        ) from exc


def coordinator_error(exc: BaseException, timeout_s: float, setting: str) -> ShardlogError | None:
    """What a client is told when a statement through the postgres_fdw coordinator failed with
    ``exc``; None: not the coordinator's or a shard's doing (let it be a bug)."""
    if isinstance(exc, asyncpg.InvalidRegularExpressionError):
        return BadRequest(f"invalid regular expression: {exc}", "q")
    if isinstance(exc, TimeoutError | asyncpg.QueryCanceledError):
        return GatewayTimeout(f"the coordinator did not answer within {timeout_s:g}s ({setting})")
    if isinstance(exc, DRIVER_ERRORS) and (
        # A day table dropped meanwhile; no user mapping for the router's login yet (fdw objects
        # made by another login until the router's next catalog refresh); a shard unreachable.
        isinstance(exc, asyncpg.UndefinedTableError | asyncpg.UndefinedObjectError)
        or is_transient(exc)
        or (getattr(exc, "sqlstate", "") or "").startswith("HV")
    ):
        return Unavailable(f"the fdw path failed: {describe(exc)}", retry_after_s=1)
    return None
