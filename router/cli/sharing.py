"""`shardlog sharing ahead`: the shared tables of today and the next days made on every shard
not marked down and registered (docs/architecture.md, "Shared tables for small owners");
`shardlog sharing promote`: the owner-days that outgrew their share moved to tables of their
own; `shardlog sharing status`: what a day's shared tables hold; `shardlog sharing compact`:
the shared tables of closed days compacted (docs/architecture.md, "Compacting shared
days"). Once each, whatever SHARDLOG_SHARED__ENABLED says; without a running router."""

from __future__ import annotations

import argparse
import sys
from datetime import date
from typing import Any

from router import clock
from router.auth import self_audit
from router.cli import auth as cli_auth
from router.cli.lifecycle import Context, with_context
from router.cli.output import output, print_table
from router.compaction.shared import compact_shared_days
from router.sharing.ahead import ahead_days, make_ahead
from router.sharing.job import locked_promotion
from router.sharing.status import sharing_status

EXIT_PARTIAL = 1


@with_context
async def cmd_ahead(ctx: Context, args: argparse.Namespace) -> int:
    days_ahead = ctx.settings.shared.days_ahead if args.days is None else args.days
    report = await make_ahead(
        ctx.metadata, ctx.pools, ctx.snapshot, ahead_days(clock.today(), days_ahead)
    )
    if report.made or report.registered or report.attached:
        await _audit(ctx, "sharing.ahead", "shared tables", report.audit_details())
    data = report.to_json()

    def show() -> None:
        print(f"days {', '.join(data['days'])}: {len(report.made)} table(s) made")
        print_table(data["made"], ["shard", "table"])
        for shard, why in sorted(report.unreachable.items()):
            print(f"shardlog: {shard} could not be reached: {why}", file=sys.stderr)

    output(args, data, show)
    return EXIT_PARTIAL if report.unreachable else 0


@with_context
async def cmd_promote(ctx: Context, args: argparse.Namespace) -> int:
    report = await locked_promotion(
        ctx.metadata, ctx.pools, ctx.snapshot, ctx.settings.shared, ctx.settings.ingest, args.day
    )
    if report is None:
        print("shardlog: another promotion run is going on; try again", file=sys.stderr)
        return EXIT_PARTIAL
    if report.promoted or report.failed:
        await _audit(ctx, "shared.promote", "owner-days", report.audit_details())
    data = report.to_json()

    def show() -> None:
        print(f"{len(report.promoted)} owner-day(s) moved to their own tables")
        print_table(data["promoted"], ["shard", "owner_id", "day", "rows", "seconds"])
        for where, why in sorted(report.failed.items()):
            print(f"shardlog: {where} not promoted: {why}", file=sys.stderr)

    output(args, data, show)
    return EXIT_PARTIAL if report.failed else 0


async def _audit(ctx: Context, action: str, target: str, details: dict[str, Any]) -> None:
    async with self_audit.standalone(ctx.settings) as audit:
        await audit.record(cli_auth.actor(), action, target, **details)


@with_context
async def cmd_status(ctx: Context, args: argparse.Namespace) -> int:
    status = await sharing_status(ctx.pools, ctx.snapshot, args.day or clock.today())
    data = {**status, "day": status["day"].isoformat()}
    for entry in data["shard_days"]:
        entry["day"] = entry["day"].isoformat()

    def show() -> None:
        print(f"shared tables of {data['day']}")
        columns = ["shard", "kind", "exists", "owner_days", "promoted", "rows", "bytes"]
        print_table(data["shard_days"], columns)
        for shard, why in sorted(status["unreachable"].items()):
            print(f"shardlog: {shard} could not be reached: {why}", file=sys.stderr)

    output(args, data, show)
    return EXIT_PARTIAL if status["unreachable"] else 0


@with_context
async def cmd_compact(ctx: Context, args: argparse.Namespace) -> int:
    days = await compact_shared_days(
        ctx.metadata, ctx.pools, ctx.settings.compaction, args.day, args.clear_now
    )
    if days is None:
        print("shardlog: another compaction run holds the lock; try again", file=sys.stderr)
        return EXIT_PARTIAL
    data = {"shard_days": [day.to_json() for day in days]}
    if any(day.steps or day.failed for day in days):
        details = {
            "shard_days": [d for d in data["shard_days"] if d["steps"] or d["state"] == "failed"]
        }
        await _audit(ctx, "shared.compact", "shared tables", details)

    def show() -> None:
        columns = [
            "state",
            "shard",
            "day",
            "steps",
            "rows",
            "segments",
            "heap_bytes",
            "packed_bytes",
        ]
        print_table(
            [{**d, "steps": ",".join(d["steps"]) or "-"} for d in data["shard_days"]], columns
        )
        for day in days:
            if day.waiting:
                print(f"{day.shard} {day.day}: waiting for {day.waiting}")
            if day.failed:
                print(f"shardlog: {day.shard} {day.day} failed: {day.failed}", file=sys.stderr)

    output(args, data, show)
    return EXIT_PARTIAL if any(day.failed for day in days) else 0


def add_parsers(commands: Any) -> None:
    sharing = commands.add_parser("sharing", help="shared tables of small owners")
    actions = sharing.add_subparsers(dest="action", required=True, metavar="ACTION")
    ahead = actions.add_parser(
        "ahead",
        help="make the shared tables of today and the next days on every shard not marked "
        "down (what the router's job does when SHARDLOG_SHARED__ENABLED is true)",
    )
    ahead.add_argument(
        "--days",
        type=int,
        choices=range(0, 31),
        metavar="N",
        help="days after today (0-30; default SHARDLOG_SHARED__DAYS_AHEAD)",
    )
    ahead.add_argument("--json", action="store_true", help="print JSON")
    ahead.set_defaults(run=cmd_ahead)
    promote = actions.add_parser(
        "promote",
        help="move the owner-days of today and yesterday that outgrew their shared table "
        "(SHARDLOG_SHARED__OWN_TABLE_ROWS) to tables of their own, once (what the router's job "
        "does when SHARDLOG_SHARED__ENABLED is true)",
    )
    promote.add_argument(
        "--day",
        action="append",
        type=date.fromisoformat,
        metavar="YYYY-MM-DD",
        help="a day to survey instead of today and yesterday (repeatable)",
    )
    promote.add_argument("--json", action="store_true", help="print JSON")
    promote.set_defaults(run=cmd_promote)
    status = actions.add_parser(
        "status",
        help="each shard's shared tables of a day: made or not, owner-days written and "
        "promoted, rows (estimated), bytes (GET /v1/admin/sharing)",
    )
    status.add_argument(
        "--day", type=date.fromisoformat, metavar="YYYY-MM-DD", help="the day (default today)"
    )
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(run=cmd_status)
    compact = actions.add_parser(
        "compact",
        help="compact the audit shared tables of closed days into segments of many owners' "
        "rows (copy, verify, switch, and the clear after SHARDLOG_COMPACTION__CLEAR_AFTER_S), "
        "once (what the router's compaction job does after each run over owner-days)",
    )
    compact.add_argument(
        "--day", type=date.fromisoformat, metavar="YYYY-MM-DD", help="only this closed day"
    )
    compact.add_argument(
        "--clear-now",
        action="store_true",
        help="clear the shared rows the copy saw without waiting CLEAR_AFTER_S",
    )
    compact.add_argument("--json", action="store_true", help="print JSON")
    compact.set_defaults(run=cmd_compact)
