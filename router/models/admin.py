"""Bodies of the admin API."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, ConfigDict, Field

from router.catalog.snapshot import OwnerKind, Placement, ShardState


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GroupIn(Body):
    name: str = Field(description="1-63 characters: lowercase letters, digits, '_' or '-'")
    placement: Placement = Field(
        "random", description="How rows spread over the group's shards: random or hash"
    )
    synchronous: bool | None = Field(
        None,
        description="Writes wait for a standby before they are acknowledged; null: the "
        "kind's default (audit synchronous, flows not)",
    )


class GroupReplicationIn(Body):
    synchronous: bool | None = Field(
        description="true: writes wait for a standby; false: they do not; null: the kind's "
        "default (audit synchronous, flows not)"
    )


class ShardIn(Body):
    name: str = Field(description="1-63 characters: lowercase letters, digits, '_' or '-'")
    group: str
    dsn: str = Field(description="libpq connection string; multi-host strings allowed")
    force: bool = Field(
        False,
        description="Use the database although it holds objects shardlog did not create, is "
        "the maintenance database 'postgres', or a registered shard whose database was never "
        "recorded cannot be reached to compare. Never lets through the catalog's database, "
        "another shard's database, a template or a standby",
    )


class ShardStateIn(Body):
    state: ShardState


class OwnerMapIn(Body):
    kind: OwnerKind
    key: str = Field(min_length=1, max_length=256)
    group: str
    force: bool = Field(False, description="Remap an owner that is mapped to another group")


class PolicyIn(Body):
    kind: OwnerKind
    group: str
    owner: str | None = Field(
        None, min_length=1, max_length=256, description="Only this owner; default: the group"
    )
    keep_days: int = Field(ge=1, description="Days kept before today")
    archive: bool = Field(False, description="Archive each day table before it is dropped")


class RetentionRunIn(Body):
    dry_run: bool = False
    force: bool = Field(False, description="Go ahead even past the max drop share")
    as_of: date | None = Field(
        None, description="Run as if today were this day; today's tables are never dropped"
    )
