"""Whether an owner-day may go into its shard's shared table of the day (docs/architecture.md,
"Placement: shared or own"). Pure: the catalog snapshot and the settings decide.

An owner-day is shareable when sharing is on, it holds audit rows (flows keep their own tables
until their shared write lands), its owner was never promoted (``own_tables``), its day is
not before the catalog's ``sharing_from`` (the days whose day tables may hold ids of either
parity), the owner has no retention policy of its own that keeps rows longer than its
group's (a shared table is dropped by the group's policy), and its own policy, if any,
archives exactly when its group's does (a shared day is archived, or not, by its group's
policy).
The writer then sends a shareable part shared unless it is larger than
SHARDLOG_SHARED__OWN_TABLE_ROWS for an owner-day it has not written shared on that shard
(router/ingest/writer.py)."""

from __future__ import annotations

from datetime import date

from router.catalog.snapshot import CatalogSnapshot, OwnerMapping, RetentionPolicy


def shareable(
    snapshot: CatalogSnapshot, mapping: OwnerMapping, day: date, enabled: bool, default_keep: int
) -> bool:
    if not enabled or mapping.kind != "audit" or mapping.own_tables:
        return False
    if day < snapshot.sharing_from:
        return False
    if keeps_longer(snapshot, mapping, default_keep):
        return False
    return not archives_apart(snapshot, mapping)


def _policies(
    snapshot: CatalogSnapshot, mapping: OwnerMapping
) -> tuple[RetentionPolicy | None, RetentionPolicy | None]:
    """The owner's own policy and its group's, of its kind (None: there is none)."""
    own = group = None
    for policy in snapshot.retention:
        if policy.kind != mapping.kind or policy.group != mapping.group:
            continue
        if policy.owner_key is None:
            group = policy
        elif policy.owner_key == mapping.key:
            own = policy
    return own, group


def archives_apart(snapshot: CatalogSnapshot, mapping: OwnerMapping) -> bool:
    """The owner's own policy archives its days where its group's does not, or the other way
    round: its shared days would be archived (or not) against its policy."""
    own, group = _policies(snapshot, mapping)
    return own is not None and own.archive != (group is not None and group.archive)


def keeps_longer(snapshot: CatalogSnapshot, mapping: OwnerMapping, default_keep: int) -> bool:
    """The owner's own policy keeps its rows longer than its group's (or the default)."""
    own, group = _policies(snapshot, mapping)
    group_keep = group.keep_days if group is not None else default_keep
    return own is not None and own.keep_days > group_keep
