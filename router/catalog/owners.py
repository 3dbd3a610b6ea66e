"""The router's memory of owner mappings. A recorded mapping only changes by an admin
remap, which bumps the catalog version, so the cache is cleared on every new version."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TypeVar

import asyncpg

from router.catalog import store
from router.catalog.cache import CatalogCache
from router.catalog.snapshot import CatalogSnapshot, OwnerKind, OwnerMapping
from router.db.failures import unavailable_when_unreachable

MAX_CACHED = 200_000

Name = TypeVar("Name", bound=Hashable)


class OwnerDirectory:
    def __init__(
        self, metadata: asyncpg.Pool, catalog: CatalogCache, *, audit_spread: int | None = None
    ) -> None:
        """``audit_spread``: the spread width new audit owners are recorded with (None: the
        whole group)."""
        self._metadata = metadata
        self._catalog = catalog
        self._audit_spread = audit_spread
        self._cache: dict[tuple[str, str], OwnerMapping] = {}
        self._by_id: dict[tuple[str, int], OwnerMapping] = {}

    async def on_catalog(self, _snapshot: CatalogSnapshot) -> None:
        self._cache.clear()
        self._by_id.clear()

    def __len__(self) -> int:
        """Mappings held (at most MAX_CACHED)."""
        return len(self._cache)

    def _cached(
        self, kind: OwnerKind, keys: Iterable[str]
    ) -> tuple[dict[str, OwnerMapping], list[str]]:
        """The cached mappings of ``keys``, and the keys not in the cache."""
        return _split(self._cache, kind, keys)

    async def resolve(
        self, kind: OwnerKind, keys: Iterable[str], tenant: str, *, exclusive: bool = True
    ) -> dict[str, OwnerMapping]:
        """Mappings of ``keys``; those not mapped yet are claimed for ``tenant`` (with
        ``exclusive``, not while some key belongs to another tenant: see store.resolve_owners,
        the caller refuses then)."""
        result, unknown = self._cached(kind, keys)
        if unknown and exclusive and any(m.tenant != tenant for m in result.values()):
            return result  # some key is another tenant's: the caller refuses, nothing claimed
        if unknown:
            with unavailable_when_unreachable("metadata database", retry_after_s=1):
                fetched = await store.resolve_owners(
                    self._metadata,
                    self._catalog.snapshot,
                    kind,
                    unknown,
                    tenant,
                    exclusive=exclusive,
                    spread=self._audit_spread,
                )
            self._remember(kind, fetched)
            result.update(fetched)
        return result

    async def widen(self, mapping: OwnerMapping, spread: int | None) -> OwnerMapping:
        """Widen an owner's spread (store.widen_spread: never narrower) and cache the mapping
        as recorded; the catalog's NOTIFY makes the other routers reload it."""
        with unavailable_when_unreachable("metadata database", retry_after_s=1):
            recorded = await store.widen_spread(self._metadata, mapping.kind, mapping.id, spread)
        if recorded is None:  # removed meanwhile (retention): place as it was mapped
            return mapping
        self._cache[(mapping.kind, mapping.key)] = recorded
        return recorded

    async def lookup(self, kind: OwnerKind, key: str) -> OwnerMapping | None:
        """The mapping of an owner that may not exist, without creating one."""
        return (await self.lookup_many(kind, [key])).get(key)

    async def lookup_many(self, kind: OwnerKind, keys: Iterable[str]) -> dict[str, OwnerMapping]:
        """The mappings of those of ``keys`` that exist, by key, without creating any. Those
        found are cached (a search of the same owner asks the metadata database no more);
        unknown keys are not (a first write may map them any time)."""
        found, missing = self._cached(kind, keys)
        if missing:
            fetched = await store.get_owners(self._metadata, kind, missing)
            self._remember(kind, fetched)
            found.update(fetched)
        return found

    async def by_ids(self, kind: OwnerKind, ids: Iterable[int]) -> dict[int, OwnerMapping]:
        """The mappings of those of ``ids`` that exist, by catalog id, without creating any:
        what a page of rows that carry owner ids needs to name and vet their owners. The cache
        answers what it holds, one query the rest; ids the catalog lacks are not cached."""
        found, missing = _split(self._by_id, kind, ids)
        if missing:
            with unavailable_when_unreachable("metadata database", retry_after_s=1):
                fetched = await store.owners_by_id(self._metadata, kind, sorted(missing))
            self._remember(kind, {m.key: m for m in fetched.values()})
            found.update(fetched)
        return found

    def _remember(self, kind: OwnerKind, mappings: dict[str, OwnerMapping]) -> None:
        if len(self._cache) + len(mappings) > MAX_CACHED:
            self._cache.clear()
            self._by_id.clear()
        for key, mapping in mappings.items():
            self._cache[(kind, key)] = mapping
            self._by_id[(kind, mapping.id)] = mapping


def _split(
    cache: dict[tuple[str, Name], OwnerMapping], kind: OwnerKind, names: Iterable[Name]
) -> tuple[dict[Name, OwnerMapping], list[Name]]:
    """The mappings ``cache`` holds of ``names`` (keys or ids), and the names it lacks."""
    found: dict[Name, OwnerMapping] = {}
    missing: list[Name] = []
    for name in set(names):
        cached = cache.get((kind, name))
        if cached is None:
            missing.append(name)
        else:
            found[name] = cached
    return found, missing
