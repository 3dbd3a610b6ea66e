"""Which owners (audit) or switches (flows) a search covers, as {catalog id: key}.

Listed keys pass ``check_key`` one by one, as the single key of a search always did: one the
token may not reach is a 403 naming the field, an unknown one covers nothing. A prefix, or no
key at all, covers the keys of the catalog with day tables in the window that the token
reaches (its tenant's, within its prefixes): the others are not refused, just not covered.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from typing import Any

import asyncpg

from router.auth.scopes import (
    KEY_NAME,
    RESERVED_PREFIX,
    SYSTEM_TENANT,
    Grant,
    check_key,
    check_key_prefix,
    key_denial,
)
from router.catalog import store
from router.catalog.owners import OwnerDirectory
from router.db.names import Kind, Reach
from router.errors import BadRequest
from router.search.query import Keys

PLURAL = {"owner": "owners", "switch": "switches"}


def visibility(kind: Kind, keys: Keys, grant: Grant) -> dict[str, Any]:
    """What decides the covered set besides the query itself (part of a cursor's binding):
    for a prefix or no key, whose keys the token reaches; listed keys are the same for all."""
    if not keys.expands:
        return {}
    tenant = None if grant.any_tenant else grant.tenant
    return {"reached_by": {"tenant": tenant, "prefixes": sorted(grant.prefixes(kind))}}


def reach(kind: Kind, keys: Keys, grant: Grant, named: Iterable[int]) -> Reach:
    """The owners a shard-day branch of a prefix or no key covers: those of the token's tenant
    and prefixes with the query's prefix, but ``named`` (owners read by their own branches), as
    ``key_denial`` would judge them (a platform key only for the platform's tokens)."""
    platform = grant.any_tenant or grant.tenant == SYSTEM_TENANT
    return Reach(
        tenant=None if grant.any_tenant else grant.tenant,
        prefixes=tuple(sorted(grant.prefixes(kind))),
        prefix=keys.prefix,
        reserved=None if platform else RESERVED_PREFIX,
        excluded=tuple(sorted(set(named))),
    )


def denial(kind: Kind, keys: Keys, grant: Grant, key: str, tenant: str) -> str | None:
    """Why an owner named by a shard-day branch's row is not one the search covers (its
    shard's mirror said otherwise: stale), or None."""
    if keys.prefix is not None and not key.startswith(keys.prefix):
        return f"{KEY_NAME[kind]} {key!r} does not start with the prefix searched"
    return key_denial(grant, kind, key, tenant)


async def covered(
    metadata: asyncpg.Pool,
    owners: OwnerDirectory,
    kind: Kind,
    keys: Keys,
    grant: Grant,
    days: tuple[date, date],
    most: int,
    setting: str = "SHARDLOG_SEARCH__MAX_MATCHED_OWNERS",
    *,
    own_only: bool = False,
) -> dict[int, str]:
    """``days``: the window's first and last day. ``most``: how many keys a prefix or no key
    may cover (``setting``: a search's, or SHARDLOG_REPORT__MAX_MATCHED_KEYS of a report);
    more is a 400. ``own_only``: a prefix or no key covers only the keys with own day tables in
    the window (the shared rows of the others are read by shard-day branches, ``reach``)."""
    field = KEY_NAME[kind]
    for key in keys.listed:
        check_key(grant, kind, key, None, field)
    found = await owners.lookup_many(kind, keys.listed) if keys.listed else {}
    result: dict[int, str] = {}
    for key, mapping in sorted(found.items()):
        check_key(grant, kind, key, mapping.tenant, field)
        result[mapping.id] = key
    if not keys.expands:
        return result
    prefix_field = f"{field}_prefix"
    if keys.prefix is not None:
        check_key_prefix(grant, kind, keys.prefix, prefix_field)
    matched = await store.owners_with_tables(
        metadata,
        kind,
        None if grant.any_tenant else grant.tenant,
        grant.prefixes(kind),
        keys.prefix,
        days[0],
        days[-1],
        most + 1,
        own_only=own_only,
    )
    if len(matched) > most:
        raise BadRequest(
            f"more than {most} {PLURAL[field]} hold rows in the window "
            f"({setting}): name them, give a longer "
            f"{prefix_field} or a shorter range",
            prefix_field if keys.prefix is not None else field,
        )
    for mapping in matched:
        if key_denial(grant, kind, mapping.key, mapping.tenant) is None:
            result[mapping.id] = mapping.key
    return result
