"""What every log shipper protocol shares: its decoded messages checked one by one against the
audit rules (a protocol that answers per record, _bulk's items or OTLP's partial_success, keeps
the good ones and names the bad), then written through the ingest service as one request of
the caller's grant. A protocol with no request id of its own can pass a key made from the
body (``body_key``): a shipper's retry of the very same body then stores nothing twice."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterable
from datetime import datetime
from typing import Any, NamedTuple

from router import clock
from router.auth.scopes import Grant
from router.errors import Invalid
from router.ingest.idempotency import tenant_key
from router.ingest.records import (
    AuditRow,
    Limits,
    Location,
    check_ts,
    checked_audit_row,
)
from router.ingest.service import IngestService, Request


class Message(NamedTuple):
    """One log message as its protocol decoded it. ``owner`` is None when the protocol's
    owner rule found nothing (the message is refused, naming the rule's field)."""

    owner: str | None
    ts: datetime
    content: str
    attrs: dict[str, Any] | None


class Checked(NamedTuple):
    rows: list[AuditRow]
    # (position of the message, why it was refused)
    refused: list[tuple[int, Invalid]]


def check(
    messages: Iterable[Message],
    label: str,
    limits: Limits,
    now: datetime | None = None,
    positions: Iterable[int] | None = None,
) -> Checked:
    """Every message as an audit row, or refused with the reason (``label[i].field``).
    ``positions``: where each message stands in its request, when the protocol refused some
    of the request's records itself (default 0, 1, ...)."""
    now = clock.now() if now is None else now
    rows: list[AuditRow] = []
    refused: list[tuple[int, Invalid]] = []
    numbered = enumerate(messages) if positions is None else zip(positions, messages, strict=True)
    for position, message in numbered:
        where = Location(label, position)
        try:
            ts = check_ts(message.ts, where, now, limits)
            rows.append(
                checked_audit_row(message.owner, ts, message.content, message.attrs, where, limits)
            )
        except Invalid as exc:
            refused.append((position, exc))
    return Checked(rows, refused)


def body_key(protocol: str, grant: Grant, digest: str) -> str:
    """An idempotency key of a body's own: the same bytes again (a shipper's retry after a
    lost answer) are the same request, per tenant."""
    return tenant_key(grant.tenant, f"{protocol}:{digest}")


async def _no_records() -> AsyncIterator[list[tuple[int, Any]]]:
    return
    yield


async def write(
    ingest: IngestService,
    rows: list[AuditRow],
    grant: Grant,
    label: str,
    key: str | None = None,
    digest: str = "",
) -> int:
    """The rows written as one request (all or nothing; acknowledged after commit): how many.
    ``digest`` identifies the body a ``key`` was made from."""
    if not rows:
        return 0
    request = Request(_no_records(), label, key, functools.partial(str, digest), grant)
    result = await ingest.write_audit_rows(request, rows, clock.now())
    return int(result["accepted"])
