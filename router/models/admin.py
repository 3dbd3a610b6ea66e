"""Bodies of the admin API: what it takes (…In) and what it answers."""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from router.catalog.snapshot import OwnerKind, Placement, ShardState
from router.models.common import CatalogName, Day, JsonInt, Out, OwnerKey, Timestamp
from router.retention.policies import MAX_KEEP_DAYS


class Body(BaseModel):
    """A request body: unknown keys refused, and every value of its JSON type (strict: 0 is
    no boolean, "5" no integer), as the schema says."""

    model_config = ConfigDict(extra="forbid", strict=True)


class GroupIn(Body):
    name: CatalogName
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
    name: CatalogName
    group: CatalogName
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
    key: OwnerKey
    group: CatalogName
    tenant: CatalogName | None = Field(
        None,
        description="The tenant the key belongs to: required for a key not mapped yet; null "
        "keeps an existing key's tenant",
    )
    force: bool = Field(
        False, description="Remap an owner that is mapped to another group or tenant"
    )


class PolicyIn(Body):
    kind: OwnerKind
    group: CatalogName
    owner: str | None = Field(
        None, min_length=1, max_length=256, description="Only this owner; default: the group"
    )
    keep_days: JsonInt = Field(
        ge=1, le=MAX_KEEP_DAYS, description="Days kept before today (at most 100 years)"
    )
    archive: bool = Field(False, description="Archive each day table before it is dropped")


class RetentionRunIn(Body):
    dry_run: bool = False
    force: bool = Field(False, description="Go ahead even past the max drop share")
    as_of: Day | None = Field(
        None, description="Run as if today were this day; today's tables are never dropped"
    )


# --- answers --------------------------------------------------------------------------------


class GroupReplication(Out):
    name: str
    placement: Placement
    synchronous: bool | None = Field(description="null: the kind's default")


class Group(GroupReplication):
    shards: list[str] = Field(description="Names of the group's shards")


class Shard(Out):
    name: str
    group: str
    dsn: str = Field(description="Passwords shown as ***")
    state: ShardState


class Policy(Out):
    id: int
    kind: OwnerKind
    group: str
    owner: str | None = Field(description="null: the policy of the whole group")
    keep_days: int
    archive: bool


class Catalog(Out):
    version: int
    groups: list[Group]
    shards: list[Shard]
    retention: list[Policy]


class Owner(Out):
    kind: OwnerKind
    key: str
    id: int
    group: str
    assigned_by: Literal["rule", "admin"]
    tenant: str = Field(description="Only this tenant's tokens reach the key")
    own_tables: bool = Field(
        description="Its new days go to day tables of its own, never to shared tables "
        "(promoted once, or by POST /v1/admin/owners/promote)"
    )


class OwnerPromoteIn(Body):
    kind: Literal["audit"] = Field(description="Flows keep their own tables")
    key: OwnerKey


class SharedShardDay(Out):
    shard: str
    day: date
    kind: OwnerKind
    exists: bool = Field(description="The shard's shared table of the day was made")
    owner_days: int = Field(description="Owner-days of the kind written into it, not promoted")
    promoted: int = Field(description="Owner-days moved from it to tables of their own")
    rows: int | None = Field(
        description="Rows it holds, the planner's estimate (null: never analysed)"
    )
    bytes: int = Field(description="Its size with its indexes")


class Sharing(Out):
    day: date
    shard_days: list[SharedShardDay]
    unreachable: dict[str, str] = Field(description="Shards that did not answer, with why")


class Table(Out):
    kind: OwnerKind
    owner: str | None = Field(description="null: the owner's mapping is gone")
    owner_id: int
    group: str | None
    day: date
    shard: str
    table: str
    rows: int
    rows_exact: bool = Field(description="false: from the table statistics")
    bytes: int
    registered: bool = Field(description="Listed in the metadata registry of day tables")
    hold_until: date | None = Field(description="A restored day is kept until this day")


class Tables(Out):
    tables: list[Table]
    unreachable: dict[str, str] = Field(description="Shard -> why it could not be read")


class CompactedOwnerDay(Out):
    kind: OwnerKind
    owner: str
    day: date
    shard: str
    state: Literal["open", "copy", "switch", "wait", "clear", "done", "failed"] = Field(
        description="open: not closed yet; copy/switch/clear: the next step; wait: switched, "
        "its heap cleared after SHARDLOG_COMPACTION__CLEAR_AFTER_S; done; failed"
    )
    steps: list[str] = Field(description="The steps this call took (none for a listing)")
    rows: int
    heap_bytes: int
    packed_bytes: int
    error: str | None = Field(description="failed: why its last attempt failed")
    failed_step: Literal["copy", "switch", "clear"] | None = Field(
        description="failed: the step that failed (the next run tries it again)"
    )
    failures: int = Field(description="failed: how many runs in a row failed it")
    first_failed_at: datetime | None
    last_failed_at: datetime | None


class CompactedShardDay(Out):
    kind: Literal["audit"]
    day: date
    shard: str
    state: Literal["open", "copy", "switch", "wait", "clear", "done", "failed"] = Field(
        description="As an owner-day's, for the shard's shared rows of the day compacted as one"
    )
    steps: list[str] = Field(description="The steps this call took (none for a listing)")
    rows: int
    segments: int
    heap_bytes: int
    packed_bytes: int
    waiting: str | None = Field(description="What its next step waits for")
    error: str | None = Field(description="failed: why its last attempt failed")
    failed_step: Literal["copy", "switch", "clear"] | None
    failures: int = Field(description="failed: how many runs in a row failed it")
    first_failed_at: datetime | None
    last_failed_at: datetime | None


class CompactionState(Out):
    owner_days: list[CompactedOwnerDay]
    shard_days: list[CompactedShardDay] = Field(
        description="Shared days of small owners, a shard-day each (docs/architecture.md, "
        '"Compacting shared days"): on the first page of a listing not restricted to one '
        "owner or to flows"
    )
    unreachable: dict[str, str] = Field(description="Shard -> why it could not be read")
    without_codec: list[str] = Field(description="Shards lacking the shardlog_segments extension")
    next_after: str | None = Field(description="The next page's `after` (null: the last page)")


DropOutcome = Literal["dropped", "already_gone", "failed"]


class PlannedDrop(Out):
    kind: OwnerKind
    owner: str | None
    owner_id: int
    day: date
    shard: str
    table: str
    keep_days: int
    outcome: DropOutcome | Literal["would_drop"] = Field(description="would_drop: a dry run")
    rows: int | None
    bytes: int | None
    archive: str | None = Field(description="Where the table was archived; planned: a dry run")
    error: str | None


class PlannedSharedDrop(Out):
    day: date
    shard: str
    group: str
    kinds: list[OwnerKind] = Field(description="Kinds whose shared_tables entries go")
    tables: list[str] = Field(description="The shard-day's shared and owner_days tables dropped")
    owner_days: int = Field(description="Owner-days its owner_days table lists (estimated)")
    bytes: int
    keep_days: dict[str, int] = Field(description="Kind -> the group's keep_days")
    archive: list[OwnerKind] = Field(
        description="Kinds whose shared table is archived before the drop (the group's policy "
        "archives)"
    )
    archives: list[str] = Field(description="The archive files written (a shard-day's, per kind)")
    outcome: DropOutcome | Literal["would_drop"] = Field(description="would_drop: a dry run")
    error: str | None


class OwnerSharedAction(Out):
    kind: OwnerKind
    owner: str
    owner_id: int
    group: str
    keep_days: int = Field(description="The owner's policy")
    group_keep_days: int = Field(description="Its group's policy (the shared day's)")
    shard: str
    day: date
    table: str | None = Field(None, description="The shared table (a purge)")
    rows: int | None = Field(description="The owner's rows there (null: the shard did not answer)")
    outcome: (
        Literal["would_purge", "purged", "left", "would_promote", "promoted", "not_promoted"] | None
    ) = Field(
        None,
        description="purge: would_purge (a dry run), purged, left (rows still there: written "
        "meanwhile); a longer policy's move: would_promote, promoted, not_promoted; null: held",
    )
    reason: str | None = Field(None, description="Why a shared table is kept (held)")


class RetentionReport(Out):
    status: Literal["done", "partial", "refused", "skipped", "dry_run"]
    run_id: int | None = Field(description="null: a dry or skipped run (not recorded)")
    as_of: date
    message: str | None
    tables_total: int
    tables_dropped: int
    tables_failed: int
    rows_dropped: int
    bytes_dropped: int
    drops: list[PlannedDrop]
    shared_days_total: int = Field(description="Shared shard-days in the run's scope")
    shared_days_dropped: int
    shared_days_failed: int
    shared_drops: list[PlannedSharedDrop] = Field(
        description="Expired shared shard-days (issue 38): one transaction per shard-day"
    )
    shared_rows_purged: int = Field(
        description="Rows of owners with shorter policies deleted from shared days"
    )
    shared_owner_days_promoted: int = Field(
        description="Owner-days of owners with longer policies moved to their own tables"
    )
    shared_days_held: int = Field(
        description="Shared tables kept: an owner with a longer policy still has rows there"
    )
    shared_purges: list[OwnerSharedAction] = Field(
        description="Owners whose own policy is shorter than their group's: their rows of "
        "the shared days the group keeps, deleted"
    )
    shared_promotions: list[OwnerSharedAction] = Field(
        description="Owners whose own policy is longer: their rows of the shared days this "
        "run drops, moved to their own tables first"
    )
    shared_held: list[OwnerSharedAction] = Field(description="Shared tables not dropped, and why")
    unreachable: dict[str, str] = Field(description="Shard -> why it could not be read")


class RetentionRun(Out):
    id: int
    started_at: Timestamp
    finished_at: Timestamp | None = Field(description="null while the run is going on")
    trigger: Literal["cli", "router", "erase"]
    as_of: date
    dry_run: bool
    forced: bool
    status: Literal["running", "done", "partial", "refused", "failed"]
    message: str | None
    tables_total: int
    tables_dropped: int
    tables_failed: int
    rows_dropped: int
    bytes_dropped: int


class RunDrop(Out):
    kind: OwnerKind
    owner_id: int
    owner: str | None = Field(description="null: the owner was erased since")
    day: date
    shard: str
    table_name: str
    outcome: DropOutcome
    rows: int | None
    bytes: int | None
    archive: str | None
    error: str | None
    at: Timestamp


class RetentionRunDetail(RetentionRun):
    drops: list[RunDrop]
