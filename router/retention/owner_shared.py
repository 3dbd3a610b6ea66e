"""Owners' own retention policies over shared days (docs/architecture.md, "Retention, erase,
archive"). A shared day expires by its group's policy: it holds every small owner of its
shard. An owner whose own policy is **shorter** loses its rows of the days in between by a
bounded, throttled delete (router/retention/shared_purge.py); one whose policy is **longer**
has its rows on the shared days this run drops moved to tables of their own first (the
promotion's move, router/sharing/promote.py), and a shared table that still holds rows of
such an owner is not dropped: held, and said why."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from typing import Any

import asyncpg

from router.catalog.snapshot import CatalogSnapshot, RetentionPolicy
from router.db.failures import DRIVER_ERRORS, describe
from router.db.names import Kind, SharedRelation
from router.db.pools import ShardPools
from router.retention.inventory import Filter
from router.retention.plan import first_kept
from router.retention.shared_days import ExpiredShared, group_archives, group_keep_days
from router.retention.shared_purge import Purge, count_owner, owner_rows, purge_owner
from router.settings import IngestSettings, SharedSettings
from router.sharing import promote


@dataclass(frozen=True)
class OwnerRule:
    """An owner's policy that keeps other days than its group's, with the owner's id."""

    policy: RetentionPolicy
    owner_id: int
    group_keep_days: int
    group_archives: bool = False

    @property
    def shorter(self) -> bool:
        """Its rows of the days its group keeps longer are deleted (a policy that archives
        never deletes: its rows stay until their shared day goes, and are archived then)."""
        return self.policy.keep_days < self.group_keep_days and not self.policy.archive

    def moves_before(self, as_of: date, day: date) -> bool:
        """Its rows of a shared day that goes are moved to its own tables first: the owner
        keeps the day longer, or archives its days where its group does not (a shared day is
        archived by its group's policy)."""
        apart = self.policy.archive and not self.group_archives
        return apart or day >= first_kept(as_of, self.policy.keep_days)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.policy.kind,
            "owner": self.policy.owner_key,
            "owner_id": self.owner_id,
            "group": self.policy.group,
            "keep_days": self.policy.keep_days,
            "group_keep_days": self.group_keep_days,
        }


def differing(
    snapshot: CatalogSnapshot, default_keep_days: int, scope: Filter
) -> list[tuple[RetentionPolicy, int]]:
    """The owners' policies in the run's scope that keep other days than their group's, or
    archive where it does not (with the group's keep_days)."""
    found = []
    for policy in snapshot.retention:
        if policy.owner_key is None:
            continue
        if scope.kind is not None and policy.kind != scope.kind:
            continue
        if scope.group is not None and policy.group != scope.group:
            continue
        group_keep = group_keep_days(snapshot, policy.kind, policy.group, default_keep_days)
        archive_apart = policy.archive and not group_archives(snapshot, policy.kind, policy.group)
        if policy.keep_days != group_keep or archive_apart:
            found.append((policy, group_keep))
    return found


async def rules(
    metadata: asyncpg.Pool, snapshot: CatalogSnapshot, default_keep_days: int, scope: Filter
) -> list[OwnerRule]:
    """The differing policies of owners that exist in their policy's group."""
    found = []
    for policy, group_keep in differing(snapshot, default_keep_days, scope):
        owner_id = await metadata.fetchval(
            "SELECT id FROM owners WHERE kind = $1 AND key = $2 AND group_name = $3",
            policy.kind,
            policy.owner_key,
            policy.group,
        )
        if owner_id is None or (scope.owner_ids is not None and owner_id not in scope.owner_ids):
            continue
        archived = group_archives(snapshot, policy.kind, policy.group)
        found.append(OwnerRule(policy, owner_id, group_keep, archived))
    return found


def purge_window(
    rule: OwnerRule, as_of: date, real_today: date, scope: Filter
) -> tuple[date, date] | None:
    """The days [first, before) a shorter policy takes the owner's rows of: those its group
    still keeps and it does not (the days before are dropped whole); None: no such day."""
    first = first_kept(as_of, rule.group_keep_days)
    before = min(first_kept(as_of, rule.policy.keep_days), real_today)
    if scope.first is not None:
        first = max(first, scope.first)
    if scope.last is not None:
        before = min(before, scope.last + timedelta(days=1))
    return (first, before) if first < before else None


@dataclass
class OwnerSharedReport:
    """What a run did (or would do) for owners' policies on shared days."""

    purges: list[dict[str, Any]] = field(default_factory=list)
    promotions: list[dict[str, Any]] = field(default_factory=list)
    held: list[dict[str, Any]] = field(default_factory=list)
    unreachable: dict[str, str] = field(default_factory=dict)

    @property
    def incomplete(self) -> bool:
        return bool(self.held or self.unreachable) or any(
            p["outcome"] == "left" for p in self.purges
        )

    def totals(self) -> dict[str, int]:
        return {
            "shared_rows_purged": sum(p["rows"] for p in self.purges if p["outcome"] == "purged"),
            "shared_owner_days_promoted": sum(
                1 for p in self.promotions if p["outcome"] == "promoted"
            ),
            "shared_days_held": len(self.held),
        }


def _purge_entries(rule: OwnerRule, purge: Purge, outcome: str) -> list[dict[str, Any]]:
    entries = [{**rule.to_json(), **p, "outcome": outcome} for p in purge.purged if p["rows"]]
    left = "would_purge" if outcome == "would_purge" else "left"
    return entries + [{**rule.to_json(), **p, "outcome": left} for p in purge.remaining]


async def purge_shorter(
    metadata: asyncpg.Pool,
    pools: ShardPools,
    snapshot: CatalogSnapshot,
    shared: SharedSettings,
    found: list[OwnerRule],
    as_of: date,
    real_today: date,
    scope: Filter,
    report: OwnerSharedReport,
    dry_run: bool,
) -> None:
    for rule in found:
        if not rule.shorter:
            continue
        window = purge_window(rule, as_of, real_today, scope)
        if window is None:
            continue
        first, before = window
        kind = rule.policy.kind
        if dry_run:
            counted = await count_owner(
                metadata, pools, snapshot, kind, rule.owner_id, before, first, scope.shard
            )
            report.purges += _purge_entries(rule, counted, "would_purge")
            report.unreachable.update(counted.unreachable)
            continue
        purge = await purge_owner(
            metadata, pools, snapshot, shared, kind, rule.owner_id, before, first, scope.shard
        )
        report.purges += _purge_entries(rule, purge, "purged")
        report.unreachable.update(purge.unreachable)


async def _rows_on(
    pools: ShardPools, shard: str, kind: Kind, day: date, owner_ids: list[int]
) -> dict[int, int | None]:
    """The rows of each of ``owner_ids`` in the shard's shared table of ``kind`` and ``day``."""
    async with pools.reader(shard, primary=True).acquire() as connection:
        counts = {owner: await owner_rows(connection, kind, day, owner) for owner in owner_ids}
    return {owner: rows for owner, rows in counts.items() if rows}


async def keep_longer(
    metadata: asyncpg.Pool,
    pools: ShardPools,
    snapshot: CatalogSnapshot,
    settings: tuple[SharedSettings, IngestSettings],
    found: list[OwnerRule],
    expired: list[ExpiredShared],
    as_of: date,
    report: OwnerSharedReport,
    dry_run: bool,
) -> list[ExpiredShared]:
    """The shared days to drop, once the owner-days of longer policies on them are moved to
    their own tables (audit: the promotion's move; flows are not written shared); a shared
    table still holding such rows is taken out of the drop (held)."""
    longer = [rule for rule in found if not rule.shorter]
    if not longer:
        return expired
    waiting = await _waiting(pools, longer, expired, as_of, report)
    if not waiting:
        return expired
    if dry_run:
        report.promotions += [{**entry, "outcome": "would_promote"} for entry in waiting]
        return expired
    audit_owners = sorted({e["owner_id"] for e in waiting if e["kind"] == "audit"})
    if audit_owners:
        shared, ingest = settings
        await metadata.execute(
            "UPDATE owners SET own_tables = true WHERE kind = 'audit' "
            "AND id = ANY($1::bigint[]) AND NOT own_tables",
            audit_owners,
        )
        days = sorted({date.fromisoformat(e["day"]) for e in waiting if e["kind"] == "audit"})
        promoted = await promote.promote_all(metadata, pools, snapshot, days, shared, ingest)
        moved = {(p.shard, p.table.owner_id, p.table.day) for p in promoted.promoted}
        report.promotions += [
            {
                **entry,
                "outcome": "promoted"
                if (entry["shard"], entry["owner_id"], date.fromisoformat(entry["day"])) in moved
                else "not_promoted",
            }
            for entry in waiting
        ]
    still = await _waiting(pools, longer, expired, as_of, report)
    return _without_held(expired, still, report)


def _without_kinds(item: ExpiredShared, held: AbstractSet[str]) -> ExpiredShared | None:
    """The shard-day's drop without the shared tables of ``held`` (and then without its
    owner_days table, the fence of the tables that stay); None: nothing left to drop."""
    if not held:
        return item
    relations: tuple[SharedRelation, ...] = tuple(
        r for r in item.relations if r not in held and r != "owner_days"
    )
    kinds = tuple(k for k in item.kinds if k not in held)
    return replace(item, relations=relations, kinds=kinds) if relations or kinds else None


def _group_archives(snapshot: CatalogSnapshot, kind: str, group: str) -> bool:
    return any(
        p.kind == kind and p.group == group and p.owner_key is None and p.archive
        for p in snapshot.retention
    )


async def _waiting(
    pools: ShardPools,
    longer: list[OwnerRule],
    expired: list[ExpiredShared],
    as_of: date,
    report: OwnerSharedReport,
) -> list[dict[str, Any]]:
    """Rows of owners with longer policies on the shared tables this run drops."""
    waiting = []
    for item in expired:
        shard, day = item.entry.shard, item.entry.day
        for kind in item.relations:
            if kind == "owner_days":
                continue
            owners = {
                rule.owner_id: rule
                for rule in longer
                if rule.policy.kind == kind
                and rule.policy.group == item.entry.group
                and rule.moves_before(as_of, day)
            }
            if not owners:
                continue
            try:
                counts = await _rows_on(pools, shard, kind, day, sorted(owners))
            except DRIVER_ERRORS as exc:
                report.unreachable[shard] = describe(exc)
                counts = dict.fromkeys(owners)  # unknown: held
            waiting += [
                {**owners[owner].to_json(), "shard": shard, "day": day.isoformat(), "rows": rows}
                for owner, rows in counts.items()
            ]
    return waiting


def _without_held(
    expired: list[ExpiredShared], still: list[dict[str, Any]], report: OwnerSharedReport
) -> list[ExpiredShared]:
    held = {(e["shard"], e["day"], e["kind"]) for e in still}
    kept = []
    for item in expired:
        key = (item.entry.shard, item.entry.day.isoformat())
        kinds_held = {kind for kind in ("audit", "flow") if (*key, kind) in held}
        for entry in still:
            if (entry["shard"], entry["day"]) == key:
                report.held.append(
                    {
                        **entry,
                        "reason": "the owner keeps this day longer than its group, or archives "
                        "it, and its rows could not be moved to a table of its own; the shared "
                        "table is kept and the drop retried next run",
                    }
                )
        left = _without_kinds(item, kinds_held)
        if left is not None:
            kept.append(left)
    return kept
