"""Which day tables a retention run drops: a pure function of the tables, the policies and
the dates, so it can be previewed (--dry-run) and tested without servers.

A policy keeps ``keep_days`` days before the run's day: with keep_days=7 on 2026-11-23 the
tables of 2026-11-16 and later stay, 2026-11-15 and earlier go. This is the same window
ingest accepts rows in. A table of the real today or later is never dropped, whatever the
run's day; nor is a restored day still on hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

from router.catalog.snapshot import CatalogSnapshot
from router.retention.inventory import TableInfo


@dataclass(frozen=True)
class Expired:
    info: TableInfo
    keep_days: int
    archive: bool
    policy_id: int | None  # None: SHARDLOG_INGEST__DEFAULT_KEEP_DAYS applied


@dataclass(frozen=True)
class Plan:
    expired: list[Expired]
    total: int  # day tables in the run's scope
    refusal: str | None  # why the run must not go ahead without --force


def first_kept(as_of: date, keep_days: int) -> date:
    """The first day a policy of ``keep_days`` keeps on ``as_of``; date.min when that reaches
    back past the calendar (a run as of year 1, say): then every day is kept."""
    try:
        return as_of - timedelta(days=keep_days)
    except OverflowError:
        return date.min


def expired_tables(
    tables: list[TableInfo],
    snapshot: CatalogSnapshot,
    as_of: date,
    real_today: date,
    default_keep_days: int,
) -> list[Expired]:
    found = []
    for info in tables:
        table = info.table
        policy = (
            snapshot.policy_for(table.kind, info.group, info.owner)
            if info.group is not None and info.owner is not None
            else None
        )
        keep = policy.keep_days if policy is not None else default_keep_days
        if table.day >= real_today or table.day >= first_kept(as_of, keep):
            continue
        if info.hold_until is not None and info.hold_until >= as_of:
            continue
        found.append(
            Expired(
                info,
                keep,
                policy.archive if policy is not None else False,
                policy.id if policy is not None else None,
            )
        )
    return found


def refusal(expired: int, total: int, max_share: float) -> str | None:
    if total == 0 or expired <= max_share * total:
        return None
    return (
        f"this run would drop {expired} of {total} day tables ({100 * expired / total:.0f}%), "
        f"more than the {100 * max_share:.0f}% one run may drop "
        f"(SHARDLOG_RETENTION__MAX_DROP_SHARE); check the clock and the retention policies, "
        f"then run again with --force if it is intended"
    )


def make_plan(
    tables: list[TableInfo],
    snapshot: CatalogSnapshot,
    as_of: date,
    real_today: date,
    default_keep_days: int,
    max_share: float,
) -> Plan:
    expired = expired_tables(tables, snapshot, as_of, real_today, default_keep_days)
    return Plan(expired, len(tables), refusal(len(expired), len(tables), max_share))
