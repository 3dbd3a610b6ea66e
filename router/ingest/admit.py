"""Rows checked one by one against what the caller may touch and their owners' retention,
before they are written, for the protocols that answer record by record (Elasticsearch _bulk's
items, OTLP's partial_success): there one foreign owner, or one row older than its owner's
retention, refuses that row only, where the native write API refuses the whole request."""

from __future__ import annotations

from datetime import UTC, date, timedelta
from typing import NamedTuple

from router.auth.scopes import Grant, key_denial
from router.catalog.cache import CatalogCache
from router.catalog.owners import OwnerDirectory
from router.catalog.snapshot import OwnerMapping
from router.errors import Forbidden, Invalid, Overloaded, ShardlogError
from router.ingest.records import AuditRow
from router.ingest.service import IngestService

_ZERO = timedelta(0)


class Admitted(NamedTuple):
    rows: list[AuditRow]
    # (position of the row, why it was refused)
    refused: list[tuple[int, ShardlogError]]


async def admit(
    ingest: IngestService,
    owners: OwnerDirectory,
    catalog: CatalogCache,
    grant: Grant,
    rows: list[AuditRow],
    label: str,
) -> Admitted:
    """The rows ``grant`` may write now. Owners not mapped yet are claimed for its tenant, as
    the write would claim them; owners outside its prefixes, reserved or of another tenant are
    never claimed, and their rows refused (403)."""
    denials: dict[str, str] = {}
    mappings: dict[str, OwnerMapping] = {}
    for key in {row.owner for row in rows}:
        problem = key_denial(grant, "audit", key, None)
        if problem is not None:
            denials[key] = problem
    wanted = {row.owner for row in rows} - denials.keys()
    # A second round: resolve claims nothing while one of its keys is another tenant's.
    for _ in range(2):
        if not wanted:
            break
        found = await owners.resolve("audit", wanted, grant.tenant, exclusive=not grant.any_tenant)
        for key, mapping in found.items():
            problem = key_denial(grant, "audit", key, mapping.tenant)
            if problem is None:
                mappings[key] = mapping
            else:
                denials[key] = problem
        wanted -= found.keys()
    snapshot = catalog.snapshot
    oldest = {key: ingest.oldest_day(snapshot, mapping) for key, mapping in mappings.items()}
    admitted: list[AuditRow] = []
    refused: list[tuple[int, ShardlogError]] = []
    for row in rows:
        limit = oldest.get(row.owner)
        if limit is not None and _day(row) >= limit:
            admitted.append(row)
        else:
            refused.append((row.position, _refusal(row, label, denials.get(row.owner), limit)))
    return Admitted(admitted, refused)


def _day(row: AuditRow) -> date:
    ts = row.ts
    return ts.date() if ts.utcoffset() == _ZERO else ts.astimezone(UTC).date()


def _refusal(row: AuditRow, label: str, denial: str | None, limit: date | None) -> ShardlogError:
    where = f"{label}[{row.position}]"
    if denial is not None:
        return Forbidden(f"{where}: {denial}", f"{where}.owner")
    if limit is None:
        # Claimed by another tenant's write between two looks: the next attempt sees whose.
        return Overloaded(f"{where}: owner is being claimed by another write; retry", where)
    return Invalid(
        f"{where}: ts {row.ts.isoformat()} is older than the retention window (oldest day "
        f"kept: {limit.isoformat()})",
        f"{where}.ts",
    )
