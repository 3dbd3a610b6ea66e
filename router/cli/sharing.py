"""`shardlog sharing ahead`: the shared tables of today and the next days made on every shard
not marked down and registered (docs/architecture.md, "Shared tables for small owners"),
once, whatever SHARDLOG_SHARED__ENABLED says; without a running router."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from router import clock
from router.auth import self_audit
from router.cli import auth as cli_auth
from router.cli.lifecycle import Context, with_context
from router.cli.output import output, print_table
from router.sharing.ahead import ahead_days, make_ahead

EXIT_PARTIAL = 1


@with_context
async def cmd_ahead(ctx: Context, args: argparse.Namespace) -> int:
    days_ahead = ctx.settings.shared.days_ahead if args.days is None else args.days
    report = await make_ahead(
        ctx.metadata, ctx.pools, ctx.snapshot, ahead_days(clock.today(), days_ahead)
    )
    if report.made or report.registered or report.attached:
        async with self_audit.standalone(ctx.settings) as audit:
            await audit.record(
                cli_auth.actor(), "sharing.ahead", "shared tables", **report.audit_details()
            )
    data = report.to_json()

    def show() -> None:
        print(f"days {', '.join(data['days'])}: {len(report.made)} table(s) made")
        print_table(data["made"], ["shard", "table"])
        for shard, why in sorted(report.unreachable.items()):
            print(f"shardlog: {shard} could not be reached: {why}", file=sys.stderr)

    output(args, data, show)
    return EXIT_PARTIAL if report.unreachable else 0


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
