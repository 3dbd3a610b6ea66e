"""`shardlog exporters`: which switch (and tenant) the collector writes a flow exporter's flows
under, logged in as the catalog role. The CLI acts for the platform: a mapping names its tenant,
or belongs to the system tenant."""

from __future__ import annotations

import argparse
from typing import Any

import asyncpg

from router.auth.scopes import SYSTEM_TENANT
from router.catalog import exporters
from router.cli import auth as cli_auth
from router.cli.catalog_session import with_catalog
from router.cli.output import output, print_table
from router.errors import NotFound
from router.settings import Settings


@with_catalog
async def cmd_list(_s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    rows = [exporters.exporter_json(m) for m in await exporters.list_exporters(db, args.tenant)]
    shown = [{**r, "domain": "any" if r["domain"] is None else r["domain"]} for r in rows]
    output(args, rows, lambda: print_table(shown, ["address", "domain", "switch", "tenant"]))


@with_catalog
async def cmd_set(s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    mapping = await exporters.set_exporter(db, args.address, args.domain, args.switch, args.tenant)
    target = exporters.describe(mapping.address, mapping.domain)
    print(f"exporter {target} -> switch {mapping.switch!r}, tenant {mapping.tenant}")
    await cli_auth.record(s, "exporter.set", target, switch=mapping.switch, tenant=mapping.tenant)


@with_catalog
async def cmd_remove(s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    address = exporters.host_address(args.address)
    target = exporters.describe(address, args.domain)
    if not await exporters.remove_exporter(db, address, args.domain):
        raise NotFound(f"exporter {target} is not mapped", "address")
    print(f"removed the mapping of exporter {target}")
    await cli_auth.record(s, "exporter.remove", target)


def add_parsers(commands: Any) -> None:
    group = commands.add_parser(
        "exporters", help="flow exporters and the switches their flows go to"
    ).add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = group.add_parser("list", help="every mapping")
    listing.add_argument("--tenant", help="only this tenant's")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(run=cmd_list)
    domain_help = "observation domain / v9 source id (default: every domain of the address)"
    mapping = group.add_parser("set", help="map an exporter (one domain, or all) to a switch")
    mapping.add_argument("address", help="the exporter's IP address")
    mapping.add_argument("switch", help="the switch key its flows are written under")
    mapping.add_argument("--domain", type=int, help=domain_help)
    mapping.add_argument(
        "--tenant", default=SYSTEM_TENANT, help=f"the switch's tenant (default: {SYSTEM_TENANT})"
    )
    mapping.set_defaults(run=cmd_set)
    remove = group.add_parser("remove", help="remove an exporter's mapping")
    remove.add_argument("address")
    remove.add_argument("--domain", type=int, help=domain_help)
    remove.set_defaults(run=cmd_remove)
