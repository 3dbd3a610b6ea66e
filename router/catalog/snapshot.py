"""An immutable view of the catalog at one version."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Literal

Placement = Literal["random", "hash"]
ShardState = Literal["active", "draining", "down"]
OwnerKind = Literal["audit", "flow"]

PLACEMENTS: tuple[Placement, ...] = ("random", "hash")
SHARD_STATES: tuple[ShardState, ...] = ("active", "draining", "down")
OWNER_KINDS: tuple[OwnerKind, ...] = ("audit", "flow")


# synchronous_commit of a write batch when its group does not say: audit rows wait for a
# standby, flows (merged counters, re-exported by switches) do not.
SYNCHRONOUS_BY_KIND: Mapping[str, bool] = {"audit": True, "flow": False}


@dataclass(frozen=True)
class ShardGroup:
    name: str
    placement: Placement
    synchronous: bool | None = None  # None: the kind's default

    def synchronous_commit(self, kind: str) -> str:
        wait = SYNCHRONOUS_BY_KIND[kind] if self.synchronous is None else self.synchronous
        return "on" if wait else "local"


@dataclass(frozen=True)
class Shard:
    name: str
    group: str
    dsn: str
    state: ShardState


@dataclass(frozen=True)
class RetentionPolicy:
    id: int
    kind: OwnerKind
    group: str
    owner_key: str | None
    keep_days: int
    archive: bool = False


@dataclass(frozen=True)
class OwnerMapping:
    kind: OwnerKind
    key: str
    group: str
    assigned_by: Literal["rule", "admin"]
    id: int
    tenant: str
    # Audit: how many shards of its group new rows go to (None: all of them); see
    # router/routing/placement.py spread_shards.
    spread: int | None = None
    # Writes into day tables of its own (promoted once out of a shared table; metadata 0021).
    own_tables: bool = False


@dataclass(frozen=True)
class CatalogSnapshot:
    version: int
    groups: Mapping[str, ShardGroup] = field(default_factory=dict)
    shards: Mapping[str, Shard] = field(default_factory=dict)
    retention: tuple[RetentionPolicy, ...] = ()
    # The first day whose owner-days may be written into shared tables (metadata 0021).
    sharing_from: date = date.max

    def shards_of(self, group: str) -> tuple[Shard, ...]:
        return tuple(shard for shard in self.shards.values() if shard.group == group)

    def active_shards(self, group: str) -> tuple[str, ...]:
        return tuple(sorted(s.name for s in self.shards_of(group) if s.state == "active"))

    def serving_shards(self, group: str) -> tuple[str, ...]:
        """Shards that hold or take rows: everything but those marked down, by name."""
        return tuple(sorted(s.name for s in self.shards_of(group) if s.state != "down"))

    def policy_for(self, kind: str, group: str, owner: str) -> RetentionPolicy | None:
        """The retention policy that applies to an owner: its own, else its group's."""
        fallback = None
        for policy in self.retention:
            if policy.kind != kind or policy.group != group:
                continue
            if policy.owner_key == owner:
                return policy
            if policy.owner_key is None:
                fallback = policy
        return fallback

    def keep_days(self, kind: str, group: str, owner: str) -> int | None:
        policy = self.policy_for(kind, group, owner)
        return policy.keep_days if policy is not None else None

    def writable_groups(self) -> tuple[str, ...]:
        """Groups with at least one active shard: the only ones a new owner may be given."""
        return tuple(sorted({s.group for s in self.shards.values() if s.state == "active"}))

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "groups": [
                {
                    "name": g.name,
                    "placement": g.placement,
                    "synchronous": g.synchronous,
                    "shards": sorted(s.name for s in self.shards_of(g.name)),
                }
                for g in sorted(self.groups.values(), key=lambda g: g.name)
            ],
            "shards": [shard_json(s) for s in sorted(self.shards.values(), key=lambda s: s.name)],
            "retention": [
                {
                    "id": p.id,
                    "kind": p.kind,
                    "group": p.group,
                    "owner": p.owner_key,
                    "keep_days": p.keep_days,
                    "archive": p.archive,
                }
                for p in self.retention
            ],
        }


def shard_json(shard: Shard) -> dict[str, Any]:
    return {
        "name": shard.name,
        "group": shard.group,
        "dsn": redact_dsn(shard.dsn),
        "state": shard.state,
    }


def redact_dsn(dsn: str) -> str:
    """Hide passwords in DSNs shown by the API, CLI and logs."""
    dsn = re.sub(r"(://[^:/@,]+):[^@/]*@", r"\1:***@", dsn)
    dsn = re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", dsn)
    return re.sub(r"([?&]password=)[^&]*", r"\1***", dsn)
