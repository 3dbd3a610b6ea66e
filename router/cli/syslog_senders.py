"""`shardlog syslog-senders`: which tenant the syslog listener writes a sender's messages as,
logged in as the catalog role. The CLI acts for the platform: a mapping names its tenant."""

from __future__ import annotations

import argparse
from typing import Any

import asyncpg

from router.catalog import syslog_senders
from router.cli import auth as cli_auth
from router.cli.catalog_session import with_catalog
from router.cli.output import output, print_table
from router.errors import NotFound
from router.settings import Settings


@with_catalog
async def cmd_list(_s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    found = await syslog_senders.list_senders(db, args.tenant)
    rows = [syslog_senders.sender_json(m) for m in found]
    output(args, rows, lambda: print_table(rows, ["sender", "tenant"]))


@with_catalog
async def cmd_set(s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    mapping = await syslog_senders.set_sender(db, args.sender, args.tenant)
    print(f"syslog sender {mapping.sender} -> tenant {mapping.tenant}")
    await cli_auth.record(s, "syslog_sender.set", mapping.sender, tenant=mapping.tenant)


@with_catalog
async def cmd_remove(s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    sender = syslog_senders.canonical_sender(args.sender)
    if not await syslog_senders.remove_sender(db, sender):
        raise NotFound(f"syslog sender {sender} is not mapped", "sender")
    print(f"removed the mapping of syslog sender {sender}")
    await cli_auth.record(s, "syslog_sender.remove", sender)


def add_parsers(commands: Any) -> None:
    group = commands.add_parser(
        "syslog-senders", help="syslog senders and the tenants their messages are written as"
    ).add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = group.add_parser("list", help="every mapping")
    listing.add_argument("--tenant", help="only this tenant's")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(run=cmd_list)
    sender_help = (
        "a network (192.0.2.0/24; an address is its /32 or /128) or cert:<common name> (a "
        "client certificate verified on the TLS port)"
    )
    mapping = group.add_parser("set", help="map a sender to a tenant")
    mapping.add_argument("sender", help=sender_help)
    mapping.add_argument("--tenant", required=True, help="the tenant its messages are written as")
    mapping.set_defaults(run=cmd_set)
    remove = group.add_parser("remove", help="remove a sender's mapping")
    remove.add_argument("sender", help=sender_help)
    remove.set_defaults(run=cmd_remove)
