"""Whether an owner-day may go into its shard's shared table of the day (docs/architecture.md,
"Placement: shared or own"). Pure: the catalog snapshot and the settings decide.

An owner-day is shareable when sharing is on, it holds audit rows (flows keep their own tables
until their shared write lands), its owner was never promoted (``own_tables``), its day is
not before the catalog's ``sharing_from`` (the days whose day tables may hold ids of either
parity), the owner has no retention policy of its own that keeps rows longer than its
group's (a shared table is dropped by the group's policy), and neither the owner's policy nor
its group's archives its days (shared days are not archived yet).
The writer then sends a shareable part shared unless it is larger than
SHARDLOG_SHARED__OWN_TABLE_ROWS for an owner-day it has not written shared on that shard
(router/ingest/writer.py)."""

from __future__ import annotations

from datetime import date

from router.catalog.snapshot import CatalogSnapshot, OwnerMapping


def shareable(
    snapshot: CatalogSnapshot, mapping: OwnerMapping, day: date, enabled: bool, default_keep: int
) -> bool:
    if not enabled or mapping.kind != "audit" or mapping.own_tables:
        return False
    if day < snapshot.sharing_from:
        return False
    return not keeps_longer(snapshot, mapping, default_keep) and not archives(snapshot, mapping)


def archives(snapshot: CatalogSnapshot, mapping: OwnerMapping) -> bool:
    """The policy that applies to the owner (its own, else its group's) archives its days."""
    policy = snapshot.policy_for(mapping.kind, mapping.group, mapping.key)
    return policy is not None and policy.archive


def keeps_longer(snapshot: CatalogSnapshot, mapping: OwnerMapping, default_keep: int) -> bool:
    """The owner's own policy keeps its rows longer than its group's (or the default)."""
    group_keep = default_keep
    own_keep = None
    for policy in snapshot.retention:
        if policy.kind != mapping.kind or policy.group != mapping.group:
            continue
        if policy.owner_key is None:
            group_keep = policy.keep_days
        elif policy.owner_key == mapping.key:
            own_keep = policy.keep_days
    return own_keep is not None and own_keep > group_keep
