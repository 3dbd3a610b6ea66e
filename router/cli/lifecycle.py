"""`shardlog tables`, `retention`, `restore` and `owner`: day tables and their lifecycle from
the command line, without a running router (the CLI talks to the databases itself)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import asyncpg

from router.auth import self_audit
from router.catalog import store
from router.catalog import tables as day_tables
from router.catalog.cache import CatalogCache
from router.catalog.owners import OwnerDirectory
from router.catalog.snapshot import OWNER_KINDS, CatalogSnapshot
from router.cli import auth as cli_auth
from router.cli.output import output, print_table
from router.db import catalog_login, pools
from router.errors import BadRequest
from router.retention import history, inventory, lifecycle, owner_export, policies
from router.retention.runner import RetentionRunner, RunOptions
from router.search.query import Window
from router.search.service import SearchService
from router.settings import Settings

# Exit codes of `retention run` besides 0 (done, or a dry run).
EXIT_PARTIAL, EXIT_REFUSED, EXIT_BUSY = 1, 3, 4


@dataclass
class Context:
    settings: Settings
    metadata: asyncpg.Pool
    pools: pools.ShardPools
    snapshot: CatalogSnapshot


@asynccontextmanager
async def context(settings: Settings) -> AsyncIterator[Context]:
    metadata = await catalog_login.open_pool(settings)
    shard_pools = pools.ShardPools(settings.pools)
    try:
        snapshot = await store.load_snapshot(metadata)
        await shard_pools.reconcile(snapshot)
        yield Context(settings, metadata, shard_pools, snapshot)
    finally:
        await shard_pools.close()
        await metadata.close()


def with_context(
    action: Callable[[Context, argparse.Namespace], Awaitable[int | None]],
) -> Callable[[Settings, argparse.Namespace], int]:
    def run(settings: Settings, args: argparse.Namespace) -> int:
        async def go() -> int:
            async with context(settings) as ctx:
                return await action(ctx, args) or 0

        return asyncio.run(go())

    return run


def parse_day(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a day (YYYY-MM-DD)") from None


async def _owner_ids(ctx: Context, kind: str | None, keys: list[str]) -> frozenset[int]:
    ids = set()
    for key in keys:
        for owner_kind in [kind] if kind else list(OWNER_KINDS):
            mapping = await store.get_owner(ctx.metadata, owner_kind, key)
            if mapping is not None:
                ids.add(mapping.id)
    return frozenset(ids)


# --- tables --------------------------------------------------------------------------------


@with_context
async def cmd_tables_list(ctx: Context, args: argparse.Namespace) -> None:
    kind = getattr(args, "kind", None)
    owners = getattr(args, "owner", None)
    wanted = inventory.Filter(
        kind=kind,
        owner_ids=await _owner_ids(ctx, kind, owners) if owners else None,
        first=getattr(args, "start", None),
        last=getattr(args, "to", None),
    )
    found = await inventory.take(
        ctx.metadata, ctx.pools, ctx.snapshot, wanted, getattr(args, "exact", False)
    )
    tables = [t.to_json() for t in found.tables]

    def show() -> None:
        print_table(tables, ["kind", "owner", "day", "shard", "table", "rows", "bytes"])
        _print_unreachable(found.unreachable)

    output(args, {"tables": tables, "unreachable": found.unreachable}, show)


@with_context
async def cmd_tables_sync(ctx: Context, _args: argparse.Namespace) -> None:
    """Record and attach day tables the shards hold that the registry lacks, and forget those
    the shards no longer hold (after a restore, a manual drop, or an upgrade)."""
    for shard in sorted(ctx.snapshot.shards.values(), key=lambda s: s.name):
        if shard.state == "down":
            continue
        async with ctx.pools.reader(shard.name, primary=True).acquire() as connection:
            changed = await day_tables.sync(
                ctx.metadata, shard, connection, ctx.pools.coordinator_login(shard.dsn)
            )
        print(f"{shard.name}: {changed} registry entries changed")


def _print_unreachable(unreachable: dict[str, str]) -> None:
    for shard, why in sorted(unreachable.items()):
        print(f"shardlog: {shard} could not be read: {why}", file=sys.stderr)


# --- retention -----------------------------------------------------------------------------


@with_context
async def cmd_retention_run(ctx: Context, args: argparse.Namespace) -> int:
    settings = ctx.settings
    runner = RetentionRunner(
        ctx.metadata,
        ctx.pools,
        settings.retention,
        settings.ingest.default_keep_days,
        sharing=(settings.shared, settings.ingest),
    )
    scope = inventory.Filter(
        kind=args.kind,
        group=args.group,
        owner_ids=await _owner_ids(ctx, args.kind, args.owner) if args.owner else None,
    )
    report = await runner.run(
        ctx.snapshot,
        RunOptions(
            trigger="cli",
            as_of=args.as_of,
            dry_run=args.dry_run,
            force=args.force,
            scope=scope,
            lock_wait_s=settings.retention.lock_wait_s,
        ),
    )
    data = report.to_json()
    if not args.dry_run:
        async with self_audit.standalone(settings) as audit:
            await self_audit.record_run(audit, cli_auth.actor(), report)

    def show() -> None:
        print_table(
            data["drops"], ["outcome", "kind", "owner", "day", "shard", "rows", "bytes", "error"]
        )
        totals = report.totals()
        print(
            f"{report.status}: {totals['tables_dropped']} of {report.tables_total} day tables "
            f"dropped, {totals['tables_failed']} failed (as of {report.as_of}"
            + (f", run {report.run_id})" if report.run_id else ")")
        )
        if report.shared_drops:
            print_table(data["shared_drops"], ["outcome", "day", "shard", "tables", "error"])
            print(
                f"shared days: {totals['shared_days_dropped']} of {report.shared_days_total} "
                f"dropped, {totals['shared_days_failed']} failed"
            )
        owners = data["shared_purges"] + data["shared_promotions"] + data["shared_held"]
        if owners:
            print_table(owners, ["outcome", "kind", "owner", "keep_days", "day", "shard", "rows"])
            print(
                f"owners' own policies on shared days: {totals['shared_rows_purged']} rows "
                f"deleted, {totals['shared_owner_days_promoted']} owner-days moved to their own "
                f"tables, {totals['shared_days_held']} shared tables kept"
            )
        if report.message:
            print(report.message, file=sys.stderr)
        _print_unreachable(report.unreachable)

    output(args, data, show)
    return {"partial": EXIT_PARTIAL, "refused": EXIT_REFUSED, "skipped": EXIT_BUSY}.get(
        report.status, 0
    )


@with_context
async def cmd_retention_history(ctx: Context, args: argparse.Namespace) -> None:
    if args.run_id is not None:
        found = await history.run(ctx.metadata, args.run_id)
        if found is None:
            raise BadRequest(f"retention run {args.run_id} does not exist", "run")
        output(
            args,
            found,
            lambda: print_table(
                found["drops"], ["outcome", "kind", "owner", "day", "shard", "rows", "bytes"]
            ),
        )
        return
    runs = await history.runs(ctx.metadata, args.limit)
    output(
        args,
        runs,
        lambda: print_table(
            runs,
            [
                "id",
                "started_at",
                "trigger",
                "as_of",
                "status",
                "tables_dropped",
                "tables_failed",
                "rows_dropped",
                "bytes_dropped",
            ],
        ),
    )


@with_context
async def cmd_retention_policies(ctx: Context, args: argparse.Namespace) -> None:
    rows = [policies.policy_json(p) for p in ctx.snapshot.retention]
    output(
        args,
        rows,
        lambda: print_table(rows, ["id", "kind", "group", "owner", "keep_days", "archive"]),
    )


@with_context
async def cmd_retention_set(ctx: Context, args: argparse.Namespace) -> None:
    policy = await policies.set_policy(
        ctx.metadata, args.kind, args.group, args.owner, args.keep_days, args.archive
    )
    who = f"owner {policy.owner_key!r}" if policy.owner_key else "the group"
    print(
        f"policy {policy.id}: {policy.kind} of {who} in {policy.group} keeps {policy.keep_days} "
        f"days{', archived before drop' if policy.archive else ''}"
    )
    await cli_auth.record(
        ctx.settings, "policy.set", f"policy {policy.id}", **policies.policy_json(policy)
    )


@with_context
async def cmd_retention_unset(ctx: Context, args: argparse.Namespace) -> None:
    await policies.remove_policy(ctx.metadata, args.id)
    print(f"policy {args.id} removed")
    await cli_auth.record(ctx.settings, "policy.remove", f"policy {args.id}")


# --- restore and owner lifecycle -----------------------------------------------------------


@with_context
async def cmd_restore(ctx: Context, args: argparse.Namespace) -> None:
    report = await lifecycle.restore_day(
        ctx.metadata,
        ctx.pools,
        ctx.snapshot,
        ctx.settings.retention,
        ctx.settings.ingest,
        args.kind,
        args.owner,
        args.day,
        args.hold_days,
    )
    data = report.to_json()
    await cli_auth.record(
        ctx.settings,
        "owner.restore",
        f"{args.kind} {args.owner}",
        day=args.day.isoformat(),
        rows=data["rows"],
        hold_until=str(data["hold_until"]),
    )

    def show() -> None:
        print_table(data["restored"], ["shard", "archived_on", "rows", "file"])
        print(f"restored {data['rows']} rows of {args.day}; kept until {data['hold_until']}")

    output(args, data, show)


@with_context
async def cmd_owner_erase(ctx: Context, args: argparse.Namespace) -> int:
    report = await lifecycle.erase_owner(
        ctx.metadata,
        ctx.pools,
        ctx.snapshot,
        ctx.settings.retention,
        ctx.settings.shared,
        args.kind,
        args.owner,
        args.before,
        args.forget,
    )
    data = report.to_json()
    # By id, as retention history names owners: an erased owner's key is not kept.
    await cli_auth.record(
        ctx.settings,
        "owner.erase",
        f"{args.kind} owner id {report.owner_id}",
        run_id=report.run_id,
        before=None if args.before is None else args.before.isoformat(),
        forget=args.forget,
        tables_dropped=len(report.dropped),
        shared_rows_purged=sum(entry["rows"] for entry in report.purged),
        archives_removed=report.archives_removed,
        complete=report.complete,
    )

    def show() -> None:
        print_table(
            data["dropped"] + data["failed"], ["kind", "day", "shard", "table", "rows", "bytes"]
        )
        purged = [entry for entry in data["shared_purged"] if entry["rows"]]
        if purged:
            print_table(purged, ["kind", "day", "shard", "table", "rows"])
        print(
            f"erased {len(report.dropped)} day tables, "
            f"{sum(entry['rows'] for entry in purged)} rows of shared tables and "
            f"{report.archives_removed} archive files of {args.kind} owner {args.owner!r}"
            + (" and forgot the owner" if report.forgotten else "")
        )
        if report.archives_rewritten:
            rows = sum(entry["rows"] for entry in report.archives_rewritten)
            print(
                f"{len(report.archives_rewritten)} archives of shared days written again "
                f"without its {rows} rows"
            )
        for entry in report.failed:
            print(f"shardlog: not dropped: {entry['table']} on {entry['shard']}: {entry['error']}")
        for entry in report.remaining:
            print(f"shardlog: still present: {entry['table']} on {entry['shard']}")
        _print_unreachable(report.unreachable)

    output(args, data, show)
    return 0 if report.complete else EXIT_PARTIAL


@with_context
async def cmd_owner_export(ctx: Context, args: argparse.Namespace) -> None:
    start = owner_export.parse_bound(args.start, "from", end=False)
    end = owner_export.parse_bound(args.to, "to", end=True)
    if end <= start:
        raise BadRequest("--to must be after --from", "to")
    settings = ctx.settings
    catalog = CatalogCache(ctx.metadata, catalog_login.catalog_dsn(settings), settings.catalog)
    await catalog.reload()
    owners = OwnerDirectory(ctx.metadata, catalog)
    if await owners.lookup(args.kind, args.owner) is None:
        raise BadRequest(f"no {args.kind} owner {args.owner!r} is known", "owner")
    search = SearchService(ctx.metadata, catalog, owners, ctx.pools, settings.search)
    await search.load_secret()
    stream = owner_export.export_owner(
        search, args.kind, args.owner, Window(start, end), args.format
    )
    target = Path(args.output) if args.output else None
    sink = target.open("wb") if target else sys.stdout.buffer
    try:
        async for chunk in stream:
            sink.write(chunk)
    finally:
        if target:
            sink.close()
        else:
            sink.flush()


# --- parsers -------------------------------------------------------------------------------


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


def add_parsers(commands: Any) -> None:
    tables_parser = commands.add_parser("tables", help="day tables: list (default) or sync")
    tables_parser.set_defaults(run=cmd_tables_list)
    _json_flag(tables_parser)
    tables = tables_parser.add_subparsers(dest="action", metavar="ACTION")
    tables.add_parser(
        "sync",
        help="reconcile the day-table registry and the fdw coordinator with what the shards hold",
    ).set_defaults(run=cmd_tables_sync)
    listing = tables.add_parser("list", help="day tables by owner, day, shard with rows and size")
    listing.add_argument("--kind", choices=OWNER_KINDS)
    listing.add_argument("--owner", action="append", help="owner key (repeatable)")
    listing.add_argument("--from", dest="start", type=parse_day, help="first day")
    listing.add_argument("--to", type=parse_day, help="last day, inclusive")
    listing.add_argument("--exact", action="store_true", help="count rows instead of estimating")
    _json_flag(listing)
    listing.set_defaults(run=cmd_tables_list)

    retention = commands.add_parser("retention", help="retention policies and runs")
    actions = retention.add_subparsers(dest="action", required=True, metavar="ACTION")
    run = actions.add_parser("run", help="drop the day tables past their policy")
    run.add_argument("--dry-run", action="store_true", help="show what would go; change nothing")
    run.add_argument("--force", action="store_true", help="go ahead past the max drop share")
    run.add_argument(
        "--as-of", type=parse_day, help="run as if today were DAY (today's tables always stay)"
    )
    run.add_argument("--kind", choices=OWNER_KINDS, help="only this kind")
    run.add_argument("--group", help="only owners of this group")
    run.add_argument("--owner", action="append", help="only this owner (repeatable)")
    _json_flag(run)
    run.set_defaults(run=cmd_retention_run)
    past = actions.add_parser("history", help="recent runs, or one run's tables")
    past.add_argument("--limit", type=int, default=20)
    past.add_argument("--run", dest="run_id", type=int, help="one run with every table it dropped")
    _json_flag(past)
    past.set_defaults(run=cmd_retention_history)
    listed = actions.add_parser("policies", help="list retention policies")
    _json_flag(listed)
    listed.set_defaults(run=cmd_retention_policies)
    setter = actions.add_parser("set", help="set the policy of a kind and group, or one owner")
    setter.add_argument("kind", choices=OWNER_KINDS)
    setter.add_argument("group")
    setter.add_argument("keep_days", type=int)
    setter.add_argument("--owner", help="only this owner")
    setter.add_argument("--archive", action="store_true", help="archive days before dropping")
    setter.set_defaults(run=cmd_retention_set)
    unset = actions.add_parser("unset", help="remove a policy by id")
    unset.add_argument("id", type=int)
    unset.set_defaults(run=cmd_retention_unset)

    restore = commands.add_parser("restore", help="load an archived day back")
    restore.add_argument("owner")
    restore.add_argument("day", type=parse_day)
    restore.add_argument("--kind", choices=OWNER_KINDS, default="audit")
    restore.add_argument(
        "--hold-days", type=int, help="keep it this many days whatever the policy says"
    )
    _json_flag(restore)
    restore.set_defaults(run=cmd_restore)

    owner = commands.add_parser("owner", help="one owner's data: export or erase")
    owner_actions = owner.add_subparsers(dest="action", required=True, metavar="ACTION")
    export = owner_actions.add_parser("export", help="every row of an owner as NDJSON or CSV")
    export.add_argument("owner")
    export.add_argument("--from", dest="start", required=True, help="day or RFC 3339 time")
    export.add_argument("--to", required=True, help="day (inclusive) or RFC 3339 time")
    export.add_argument("--kind", choices=OWNER_KINDS, default="audit")
    export.add_argument("--format", choices=("ndjson", "csv"), default="ndjson")
    export.add_argument("--output", help="file to write; default: standard output")
    export.set_defaults(run=cmd_owner_export)
    erase = owner_actions.add_parser("erase", help="drop an owner's tables on every shard")
    erase.add_argument("owner")
    erase.add_argument("--kind", choices=OWNER_KINDS, default="audit")
    erase.add_argument("--before", type=parse_day, help="only days before DAY")
    erase.add_argument(
        "--forget", action="store_true", help="also remove the owner's mapping and policies"
    )
    _json_flag(erase)
    erase.set_defaults(run=cmd_owner_erase)
