"""The one dependency every /v1 route declares, as Annotated aliases: ``AuditWrite``,
``AuditRead``, ``FlowsWrite``, ``FlowsRead``, ``AuditReport``, ``FlowsReport`` (``reports``
plus the read scope), ``Reports``, ``AuditTail``, ``FlowsTail`` (``tail`` plus the read scope),
``Admin``, ``AnyToken`` (a valid token, no scope: ``GET /v1/whoami``). Each takes
the caller the authentication middleware found (router/auth/middleware.py: 401 before the
body is read; authenticated here when a request did not pass it), checks the token's request
rate (429) and the scope (403 naming it), and hands the route the ``Caller``; routes pass
``caller.grant`` to the services, where ``router.auth.scopes.check_key`` decides about every
key. No route checks access itself.

Writes also wait out the token's byte-rate debt; searches and exports hold one of the token's
search slots until their answer is sent. Health, metrics and the OpenAPI documents declare
none of these: they are open.

All ``async def``: FastAPI runs a plain function in its thread pool, two more turns of the
event loop for every request."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Annotated

from fastapi import Depends, Request

from router.auth import scopes
from router.auth.middleware import caller_of
from router.auth.registry import Caller, TokenRegistry

# The OpenAPI security scheme of every /v1 operation (router/api/openapi.py declares it: a
# FastAPI security dependency would cost every request another dependency to solve).
SCHEME_NAME = "token"
SECURITY_SCHEME = {
    "type": "http",
    "scheme": "bearer",
    "bearerFormat": "shl_<id>_<secret>",
    "description": "An API token: `shardlog tokens create` or POST /v1/admin/tokens",
}


def _caller(request: Request, scope: str | None) -> Caller:
    """The authenticated caller, within its request rate, holding ``scope`` (None: any valid
    token will do)."""
    caller = caller_of(request.scope)
    if caller is None:
        registry: TokenRegistry = request.app.state.runtime.auth
        caller = registry.authenticate(request.headers.get("authorization"))
    if caller.limiter is not None:
        caller.limiter.admit()
    if scope is not None:
        scopes.check_scope(caller.grant, scope)
    return caller


def _writer(caller: Caller) -> Caller:
    if caller.limiter is not None:
        caller.limiter.admit_write()
    return caller


@contextmanager
def _search_slot(caller: Caller) -> Iterator[None]:
    limiter = caller.limiter
    if limiter is None:
        yield
        return
    limiter.enter_search()
    try:
        yield
    finally:
        limiter.leave_search()


async def audit_write(request: Request) -> Caller:
    return _writer(_caller(request, scopes.AUDIT_WRITE))


async def flows_write(request: Request) -> Caller:
    return _writer(_caller(request, scopes.FLOWS_WRITE))


async def audit_read(request: Request) -> AsyncIterator[Caller]:
    caller = _caller(request, scopes.AUDIT_READ)
    with _search_slot(caller):
        yield caller


async def flows_read(request: Request) -> AsyncIterator[Caller]:
    caller = _caller(request, scopes.FLOWS_READ)
    with _search_slot(caller):
        yield caller


async def reports(request: Request) -> Caller:
    return _caller(request, scopes.REPORTS)


def _reporter(request: Request, read_scope: str) -> Caller:
    """A report needs ``reports`` and the read scope of its data: it reveals what a search of
    the same data would, summed."""
    caller = _caller(request, scopes.REPORTS)
    scopes.check_scope(caller.grant, read_scope)
    return caller


async def audit_report(request: Request) -> AsyncIterator[Caller]:
    caller = _reporter(request, scopes.AUDIT_READ)
    with _search_slot(caller):
        yield caller


async def flows_report(request: Request) -> AsyncIterator[Caller]:
    caller = _reporter(request, scopes.FLOWS_READ)
    with _search_slot(caller):
        yield caller


def _tailer(request: Request, read_scope: str) -> Caller:
    """A tail needs ``tail`` and the read scope of its data: it shows what a search would. No
    search slot: a stream lasts, and streams have a cap of their own per router
    (SHARDLOG_TAIL__MAX_SUBSCRIPTIONS)."""
    caller = _caller(request, scopes.TAIL)
    scopes.check_scope(caller.grant, read_scope)
    return caller


async def audit_tail(request: Request) -> Caller:
    return _tailer(request, scopes.AUDIT_READ)


async def flows_tail(request: Request) -> Caller:
    return _tailer(request, scopes.FLOWS_READ)


async def admin(request: Request) -> Caller:
    return _caller(request, scopes.ADMIN)


async def any_token(request: Request) -> Caller:
    """Any valid token, whatever its scopes: for a caller to learn what its own token may do."""
    return _caller(request, None)


AuditWrite = Annotated[Caller, Depends(audit_write)]
AuditRead = Annotated[Caller, Depends(audit_read)]
FlowsWrite = Annotated[Caller, Depends(flows_write)]
FlowsRead = Annotated[Caller, Depends(flows_read)]
Reports = Annotated[Caller, Depends(reports)]
AuditReport = Annotated[Caller, Depends(audit_report)]
FlowsReport = Annotated[Caller, Depends(flows_report)]
AuditTail = Annotated[Caller, Depends(audit_tail)]
FlowsTail = Annotated[Caller, Depends(flows_tail)]
Admin = Annotated[Caller, Depends(admin)]
AnyToken = Annotated[Caller, Depends(any_token)]
