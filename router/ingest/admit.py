"""Rows checked one by one against what the caller may touch and their owners' retention,
before they are written, for the protocols that answer record by record (Elasticsearch _bulk's
items, OTLP's partial_success, Loki's ignored entries): there one foreign or reserved owner,
or one row older than its owner's retention, refuses that row only, where the native write API
refuses the whole request. Nothing is claimed here: the write of the admitted rows claims
their new owners (router/ingest/screen.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from router import clock
from router.auth.scopes import Grant
from router.errors import ShardlogError
from router.ingest.records import AuditRow
from router.ingest.screen import Where
from router.ingest.service import IngestService


class Admitted(NamedTuple):
    rows: list[AuditRow]
    # (position of the row, why it was refused)
    refused: list[tuple[int, ShardlogError]]


async def admit(
    ingest: IngestService,
    grant: Grant,
    rows: Sequence[AuditRow],
    label: str,
    where: Where | None = None,
    key_where: Where | None = None,
) -> Admitted:
    """The rows ``grant`` may write now, and the others refused: owners outside its prefixes,
    reserved for the platform or of another tenant (403), days past retention (422). Each
    refusal names ``where(position)`` (default ``label[position]``), a refused owner
    ``key_where(position)`` when given."""
    screened = await ingest.screener.screen(
        grant,
        "audit",
        rows,
        "owner",
        where or (lambda position: f"{label}[{position}]"),
        clock.today(),
        key_where=key_where,
    )
    return Admitted(screened.rows, screened.refused)
