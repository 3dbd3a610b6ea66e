"""`shardlog compact`: closed audit and flow days packed into segments (docs/architecture.md,
"Compacted days"; docs/operations.md, "Compaction"), without a running router."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from router.auth import self_audit
from router.catalog import store
from router.cli import auth as cli_auth
from router.cli.lifecycle import Context, parse_day, with_context
from router.cli.output import output, print_table
from router.compaction.job import locked_run
from router.compaction.runner import KINDS, Compactor, Scope, owner_keys, report_json
from router.compaction.shared import SharedDay, compact_shared_days, survey_shared_days
from router.db.names import Kind
from router.errors import BadRequest

EXIT_FAILED, EXIT_BUSY = 1, 4
BUSY = "shardlog: another compaction run holds the lock; try again"
_OWNER_NAME = {"audit": "audit owner", "flow": "switch"}
COLUMNS = [
    "state",
    "kind",
    "owner",
    "day",
    "shard",
    "rows",
    "heap_bytes",
    "packed_bytes",
    "failures",
    "error",
]
SHARD_DAY_COLUMNS = [
    "state",
    "kind",
    "day",
    "shard",
    "steps",
    "rows",
    "segments",
    "heap_bytes",
    "packed_bytes",
    "failures",
    "error",
]


async def _scope(ctx: Context, args: argparse.Namespace) -> Scope:
    kinds: frozenset[Kind] = KINDS if args.kind == "all" else frozenset([args.kind])
    if not args.owner:
        return Scope(day=args.day, kinds=kinds, failed_only=args.failed)
    ids: set[int] = set()
    for key in args.owner:
        found = [await store.get_owner(ctx.metadata, kind, key) for kind in sorted(kinds)]
        mappings = [mapping for mapping in found if mapping is not None]
        if not mappings:
            what = "audit owner or switch" if args.kind == "all" else _OWNER_NAME[args.kind]
            raise BadRequest(f"no {what} {key!r}", "owner")
        ids.update(mapping.id for mapping in mappings)
    return Scope(day=args.day, owner_ids=frozenset(ids), kinds=kinds, failed_only=args.failed)


async def _shard_days(ctx: Context, args: argparse.Namespace) -> list[SharedDay] | None:
    """The shared days' shard-days (the audit kind, no owner named): listed, or compacted
    after the owner-days (None: another run took the lock in between)."""
    if args.owner or args.kind == "flow":
        return []
    settings = ctx.settings.compaction
    if args.dry_run:
        survey = await survey_shared_days(ctx.metadata, ctx.pools, settings, args.day, args.failed)
        return survey.days
    return await compact_shared_days(
        ctx.metadata, ctx.pools, settings, args.day, args.clear_now, failed_only=args.failed
    )


@with_context
async def cmd_compact(ctx: Context, args: argparse.Namespace) -> int:
    compactor = Compactor(ctx.metadata, ctx.pools, ctx.settings.compaction)
    scope = await _scope(ctx, args)
    if args.dry_run:
        report = await compactor.survey(ctx.snapshot, scope)
    else:
        ran = await locked_run(ctx.metadata, compactor, ctx.snapshot, scope, args.clear_now)
        if ran is None:
            print(BUSY, file=sys.stderr)
            return EXIT_BUSY
        report = ran
    shard_days = await _shard_days(ctx, args)
    data = report_json(report, await owner_keys(ctx.metadata, report))
    data["shard_days"] = [d.to_json() for d in shard_days or []]
    changed_days = [d for d in data["shard_days"] if d["steps"] or d["state"] == "failed"]
    if not args.dry_run and (report.changed or changed_days):
        async with self_audit.standalone(ctx.settings) as audit:
            what = f"day {args.day}" if args.day else "closed days"
            if report.changed:
                await audit.record(
                    cli_auth.actor(), "compaction.run", what, **report.audit_details()
                )
            if changed_days:
                await audit.record(
                    cli_auth.actor(), "shared.compact", what, shard_days=changed_days
                )

    def show() -> None:
        print_table(data["owner_days"], COLUMNS)
        if data["shard_days"]:
            print_table(
                [{**d, "steps": ",".join(d["steps"]) or "-"} for d in data["shard_days"]],
                SHARD_DAY_COLUMNS,
            )
        for shard in report.without_codec:
            print(f"shardlog: {shard} lacks the shardlog_segments extension", file=sys.stderr)
        for shard, why in sorted(report.unreachable.items()):
            print(f"shardlog: {shard} could not be read: {why}", file=sys.stderr)

    output(args, data, show)
    if shard_days is None:
        print(BUSY, file=sys.stderr)
        return EXIT_BUSY
    return EXIT_FAILED if report.failed or any(d.failed for d in shard_days) else 0


def add_parsers(commands: Any) -> None:
    compact = commands.add_parser(
        "compact",
        help="pack closed audit and flow days into compressed segments, small owners' shared "
        "days a shard-day each (or --dry-run: list)",
    )
    compact.add_argument("--dry-run", action="store_true", help="list the state; change nothing")
    compact.add_argument("--day", type=parse_day, help="only this UTC day")
    compact.add_argument(
        "--kind", choices=["audit", "flow", "all"], default="all", help="only days of this kind"
    )
    compact.add_argument(
        "--owner", action="append", help="only this audit owner or switch (repeatable)"
    )
    compact.add_argument(
        "--clear-now",
        action="store_true",
        help="clear the heap rows at once instead of SHARDLOG_COMPACTION__CLEAR_AFTER_S after "
        "the switch (the clear still waits for every transaction reading the heap)",
    )
    compact.add_argument(
        "--failed",
        action="store_true",
        help="only the owner-days whose last step failed (listed, or tried again)",
    )
    compact.add_argument("--json", action="store_true", help="print JSON")
    compact.set_defaults(run=cmd_compact)
