"""Which owner-days may go into shared tables (router/ingest/sharing.py; docs/architecture.md,
"Placement: shared or own")."""

from __future__ import annotations

from datetime import date

from router.catalog.snapshot import CatalogSnapshot, OwnerMapping, RetentionPolicy
from router.ingest.sharing import keeps_longer, shareable

DAY = date(2026, 11, 23)
OWNER = OwnerMapping("audit", "alice", "g1", "rule", 42, "default")
SWITCH = OwnerMapping("flow", "sw1", "g1", "rule", 7, "default")


def snapshot(*policies: RetentionPolicy, sharing_from: date = date(2026, 1, 1)) -> CatalogSnapshot:
    return CatalogSnapshot(version=1, retention=policies, sharing_from=sharing_from)


def test_sharing_off_flows_and_days_before_sharing_from_keep_their_own_tables() -> None:
    assert shareable(snapshot(), OWNER, DAY, True, 30)
    assert not shareable(snapshot(), OWNER, DAY, False, 30)
    assert not shareable(snapshot(), SWITCH, DAY, True, 30)
    assert not shareable(snapshot(sharing_from=DAY), OWNER, date(2026, 11, 22), True, 30)
    assert shareable(snapshot(sharing_from=DAY), OWNER, DAY, True, 30)
    # A promoted owner starts its next days in tables of its own.
    promoted = OwnerMapping("audit", "bob", "g1", "rule", 43, "default", None, True)
    assert not shareable(snapshot(), promoted, DAY, True, 30)
    # A catalog read before the migration knows no sharing day: nothing is shared.
    assert not shareable(CatalogSnapshot(version=1), OWNER, DAY, True, 30)


def test_an_owner_kept_longer_than_its_group_keeps_its_own_tables() -> None:
    group = RetentionPolicy(1, "audit", "g1", None, 30)
    longer = RetentionPolicy(2, "audit", "g1", "alice", 90)
    shorter = RetentionPolicy(3, "audit", "g1", "alice", 7)
    elsewhere = RetentionPolicy(4, "audit", "g2", "alice", 365)
    other_kind = RetentionPolicy(5, "flow", "g1", "alice", 365)
    assert keeps_longer(snapshot(group, longer), OWNER, 30)
    assert not shareable(snapshot(group, longer), OWNER, DAY, True, 30)
    assert not keeps_longer(snapshot(group, shorter), OWNER, 30)
    assert not keeps_longer(snapshot(group, elsewhere, other_kind), OWNER, 30)
    # No group policy: the default decides.
    assert keeps_longer(snapshot(RetentionPolicy(6, "audit", "g1", "alice", 40)), OWNER, 30)
    assert not keeps_longer(snapshot(RetentionPolicy(6, "audit", "g1", "alice", 40)), OWNER, 40)


def test_an_owner_archived_apart_from_its_group_keeps_its_own_tables() -> None:
    """A shared day is archived, or not, by its group's policy: an owner whose own policy
    says otherwise keeps its own tables; one that says the same shares."""
    archived_group = RetentionPolicy(1, "audit", "g1", None, 30, archive=True)
    own_archived = RetentionPolicy(2, "audit", "g1", "alice", 30, archive=True)
    own_plain = RetentionPolicy(3, "audit", "g1", "alice", 30)
    assert shareable(snapshot(archived_group), OWNER, DAY, True, 30)
    assert shareable(snapshot(archived_group, own_archived), OWNER, DAY, True, 30)
    assert not shareable(snapshot(own_archived), OWNER, DAY, True, 30)
    assert not shareable(snapshot(archived_group, own_plain), OWNER, DAY, True, 30)
    # Another group's or kind's archive is not the owner's group's.
    elsewhere = RetentionPolicy(4, "audit", "g2", None, 30, archive=True)
    assert not shareable(snapshot(elsewhere, own_archived), OWNER, DAY, True, 30)
    other_kind = RetentionPolicy(5, "flow", "g1", None, 30, archive=True)
    assert shareable(snapshot(other_kind, own_plain), OWNER, DAY, True, 30)
