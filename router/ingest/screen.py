"""Rows screened before any of their keys is claimed: each checked against what its writer
may touch (the platform's reserved keys, the token's prefixes, keys of another tenant) and
against its owner's retention, with the mappings known now and, for a key not mapped yet, the
group the rule would give it. A refused write therefore claims nothing; the write path claims
only the keys of the rows that passed (router/ingest/service.py), the protocols that answer
record by record keep those rows and name the others (router/ingest/admit.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, NamedTuple

from router.auth.scopes import Grant, key_denial, reserved_write
from router.catalog.cache import CatalogCache
from router.catalog.owners import OwnerDirectory
from router.catalog.snapshot import CatalogSnapshot, OwnerKind, OwnerMapping
from router.errors import Forbidden, Invalid, ShardlogError
from router.routing.groups import choose_group

_ZERO = timedelta(0)
# Rows screened between two turns of the event loop: health checks stay fast.
YIELD_EVERY_ROWS = 1_000
# Names a row in errors, from its position: ``records[12]``.
Where = Callable[[int], str]


class Screened(NamedTuple):
    rows: list[Any]
    # (position of the row, why it was refused), in the rows' order
    refused: list[tuple[int, ShardlogError]]
    # the admitted rows' keys not mapped yet: what writing them claims
    new_keys: set[str]


def oldest_day(
    snapshot: CatalogSnapshot, kind: str, group: str, key: str, today: date, default_keep: int
) -> date:
    """The oldest day a row of ``key`` (in ``group``) may fall on."""
    keep: int = snapshot.keep_days(kind, group, key) or default_keep
    return today - timedelta(days=keep)


def day_of(row: Any) -> date:
    ts: datetime = row.ts
    return ts.date() if ts.utcoffset() == _ZERO else ts.astimezone(UTC).date()


def denial(
    grant: Grant, kind: OwnerKind, key: str, tenant: str | None, platform: bool
) -> str | None:
    """Why ``grant`` may not write ``key`` (of ``tenant``; None: not mapped yet), or None.
    ``platform``: the router's own self-audit, the one writer of the platform's keys."""
    if not platform:
        reserved = reserved_write(kind, key)
        if reserved is not None:
            return reserved
    return key_denial(grant, kind, key, tenant)


class Screener:
    """Screens rows against the catalog as the router knows it now."""

    def __init__(self, owners: OwnerDirectory, catalog: CatalogCache, default_keep: int) -> None:
        self._owners = owners
        self._catalog = catalog
        self._default_keep = default_keep

    async def screen(
        self,
        grant: Grant,
        kind: OwnerKind,
        rows: Sequence[Any],
        attribute: str,
        where: Where,
        today: date,
        *,
        platform: bool = False,
        known_days: bool = True,
        key_where: Where | None = None,
    ) -> Screened:
        """The rows that may be written, and the others refused: a key the writer may not
        touch (403 naming ``where(position).attribute``, or ``key_where``'s place when the key
        stands elsewhere, as a Loki stream's owner label), a day older than the owner's
        retention (422 naming ``.ts``). Claims nothing. Without ``known_days`` the days are
        checked only when some key is not mapped yet (a write of mapped keys claims nothing, and
        the write path checks their days as it places them). ``platform``: the router's own
        self-audit."""
        keys = {getattr(row, attribute) for row in rows}
        denied = {
            key: problem
            for key in keys
            if (problem := denial(grant, kind, key, None, platform)) is not None
        }
        known: dict[str, OwnerMapping] = {}
        if len(denied) < len(keys):
            known = await self._owners.lookup_many(kind, keys - denied.keys())
        snapshot = self._catalog.snapshot
        writable = snapshot.writable_groups()
        groups: dict[str, str] = {}
        for key in keys - denied.keys():
            mapping = known.get(key)
            if mapping is None:
                if writable:  # else the write answers that no group takes rows
                    groups[key] = choose_group(kind, key, writable)
                continue
            problem = denial(grant, kind, key, mapping.tenant, platform)
            if problem is not None:
                denied[key] = problem
            else:
                groups[key] = mapping.group
        new_keys = {key for key in groups if key not in known}
        oldest: dict[str, date] = {}
        if known_days or new_keys:
            oldest = {
                key: oldest_day(snapshot, kind, group, key, today, self._default_keep)
                for key, group in groups.items()
            }
        if not denied and not oldest:
            return Screened(list(rows), [], new_keys)
        key_where = key_where or where
        admitted, refused = await _sorted(rows, attribute, denied, oldest, where, key_where)
        admitted_keys = {getattr(row, attribute) for row in admitted}
        return Screened(admitted, refused, new_keys & admitted_keys)


async def _sorted(
    rows: Sequence[Any],
    attribute: str,
    denied: dict[str, str],
    oldest: dict[str, date],
    where: Where,
    key_where: Where,
) -> tuple[list[Any], list[tuple[int, ShardlogError]]]:
    """The rows admitted, and the others with why: a denied key, a day before its oldest."""
    admitted: list[Any] = []
    refused: list[tuple[int, ShardlogError]] = []
    for start in range(0, len(rows), YIELD_EVERY_ROWS):
        await asyncio.sleep(0)
        for row in rows[start : start + YIELD_EVERY_ROWS]:
            key = getattr(row, attribute)
            problem = denied.get(key)
            limit = oldest.get(key)
            if problem is not None:
                place = key_where(row.position)
                error: ShardlogError = Forbidden(f"{place}: {problem}", f"{place}.{attribute}")
            elif limit is not None and day_of(row) < limit:
                place = where(row.position)
                error = Invalid(
                    f"{place}: ts {row.ts.isoformat()} is older than the retention window "
                    f"(oldest day kept: {limit.isoformat()})",
                    f"{place}.ts",
                )
            else:
                admitted.append(row)
                continue
            refused.append((row.position, error))
    return admitted, refused


def first_refusal(refused: Sequence[tuple[int, ShardlogError]]) -> ShardlogError:
    """What refuses a whole request: the first row with a key its writer may not touch, else
    the first refused row."""
    for _, error in refused:
        if isinstance(error, Forbidden):
            return error
    return refused[0][1]
