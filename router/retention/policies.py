"""Retention policies in the catalog: set (insert or replace) and remove. A change bumps the
catalog version, so every router sees it."""

from __future__ import annotations

from typing import Any

import asyncpg

from router.catalog import rules
from router.catalog.snapshot import RetentionPolicy
from router.errors import Invalid, NotFound

Executor = asyncpg.Pool | asyncpg.Connection
# Retention beyond a century is no retention; the bound also keeps the day arithmetic of ingest
# and retention (today minus keep_days) inside the calendar and the value inside an integer.
MAX_KEEP_DAYS = 36_500


def policy_json(policy: RetentionPolicy) -> dict[str, Any]:
    return {
        "id": policy.id,
        "kind": policy.kind,
        "group": policy.group,
        "owner": policy.owner_key,
        "keep_days": policy.keep_days,
        "archive": policy.archive,
    }


async def set_policy(
    db: Executor, kind: str, group: str, owner: str | None, keep_days: int, archive: bool
) -> RetentionPolicy:
    if kind not in ("audit", "flow"):
        raise Invalid("kind must be 'audit' or 'flow'", "kind")
    rules.check_name(group, "group")
    if owner is not None:
        rules.check_owner_key(owner, "owner")
    if keep_days < 1:
        raise Invalid("keep_days must be at least 1 (today is never dropped)", "keep_days")
    if keep_days > MAX_KEEP_DAYS:
        raise Invalid(f"keep_days is at most {MAX_KEEP_DAYS} (100 years)", "keep_days")
    if await db.fetchval("SELECT 1 FROM shard_groups WHERE name = $1", group) is None:
        raise NotFound(f"shard group {group!r} does not exist", "group")
    row = await db.fetchrow(
        "INSERT INTO retention_policies (kind, group_name, owner_key, keep_days, archive) "
        "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (kind, group_name, owner_key) DO UPDATE "
        "SET keep_days = EXCLUDED.keep_days, archive = EXCLUDED.archive "
        "RETURNING id, kind, group_name, owner_key, keep_days, archive",
        kind,
        group,
        owner,
        keep_days,
        archive,
    )
    if row is None:
        raise RuntimeError("the policy upsert returned no row")
    return RetentionPolicy(
        row["id"],
        row["kind"],
        row["group_name"],
        row["owner_key"],
        row["keep_days"],
        row["archive"],
    )


async def remove_policy(db: Executor, policy_id: int) -> None:
    status = await db.execute("DELETE FROM retention_policies WHERE id = $1", policy_id)
    if status.split()[-1] == "0":
        raise NotFound(f"retention policy {policy_id} does not exist", "id")
