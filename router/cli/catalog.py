"""`shardlog groups|shards|owners|catalog`: catalog administration, logged in as the catalog
role."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

import asyncpg

from router.catalog import mirror, store
from router.catalog import shards as shard_admin
from router.catalog.snapshot import OWNER_KINDS, PLACEMENTS, shard_json
from router.cli import auth as cli_auth
from router.cli.catalog_session import with_catalog
from router.cli.output import output, print_table
from router.db.pools import ShardPools
from router.errors import ShardlogError
from router.settings import Settings


@with_catalog
async def cmd_groups_list(_s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    groups = (await store.load_snapshot(db)).to_json()["groups"]
    output(
        args,
        groups,
        lambda: print_table(
            [
                {
                    **g,
                    "shards": ",".join(g["shards"]),
                    "synchronous": {True: "on", False: "off", None: "default"}[g["synchronous"]],
                }
                for g in groups
            ],
            ["name", "placement", "synchronous", "shards"],
        ),
    )


@with_catalog
async def cmd_groups_add(s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    group = await store.add_group(db, args.name, args.placement, _replication(args.synchronous))
    print(f"added group {group.name} (placement {group.placement})")
    await cli_auth.record(
        s, "group.add", group.name, placement=group.placement, synchronous=group.synchronous
    )


def _replication(choice: str | None) -> bool | None:
    return {"on": True, "off": False}.get(choice or "default")


@with_catalog
async def cmd_groups_remove(s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    policies = await store.remove_group(db, args.name)
    print(f"removed group {args.name} ({policies} retention policies with it)")
    await cli_auth.record(s, "group.remove", args.name, retention_policies=policies)


async def cmd_groups_replication(
    s: Settings, args: argparse.Namespace, db: asyncpg.Connection
) -> None:
    group = await store.set_group_replication(db, args.name, _replication(args.synchronous))
    shown = {True: "on", False: "off", None: "default (audit on, flows off)"}[group.synchronous]
    print(f"group {group.name}: synchronous replication {shown}")
    await cli_auth.record(s, "group.replication", group.name, synchronous=group.synchronous)


@with_catalog
async def cmd_shards_list(_s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    shards = (await store.load_snapshot(db)).to_json()["shards"]
    output(args, shards, lambda: print_table(shards, ["name", "group", "state", "dsn"]))


@with_catalog
async def cmd_shards_add(s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    shard = await shard_admin.register_shard(
        db, s.schema_dir, s.pools, args.name, args.group, args.dsn, force=args.force
    )
    shown = shard_json(shard)["dsn"]
    print(f"added shard {shard.name} to group {shard.group}: {shown}")
    await cli_auth.record(
        s, "shard.add", shard.name, group=shard.group, dsn=shown, force=args.force
    )


def state_command(state: str) -> Callable[[Settings, argparse.Namespace], int]:
    @with_catalog
    async def command(s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
        shard = await store.set_shard_state(db, args.name, state)
        print(f"shard {shard.name} is now {shard.state}")
        await cli_auth.record(s, "shard.state", shard.name, state=shard.state)

    return command


@with_catalog
async def cmd_owners_show(_s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    mapping = await store.get_owner(db, args.kind, args.key)
    if mapping is None:
        raise ShardlogError(f"{args.kind} owner {args.key!r} is not mapped yet", "key")
    print(
        f"{mapping.kind} {mapping.key!r} -> {mapping.group} ({mapping.assigned_by}), "
        f"tenant {mapping.tenant}"
    )


@with_catalog
async def cmd_owners_map(s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    mapping = await store.map_owner(
        db, args.kind, args.key, args.group, args.tenant, force=args.force
    )
    print(f"{mapping.kind} {mapping.key!r} -> {mapping.group}, tenant {mapping.tenant}")
    shard_pools = ShardPools(s.pools)
    try:
        await shard_pools.reconcile(await store.load_snapshot(db))
        missed = await mirror.remirror(db, shard_pools, mapping)
    finally:
        await shard_pools.close()
    if missed:
        print(f"owner mirror not updated on {', '.join(missed)}: map the owner again to repair")
    await cli_auth.record(
        s,
        "owner.map",
        f"{mapping.kind} {mapping.key}",
        group=mapping.group,
        tenant=mapping.tenant,
        force=args.force,
    )


@with_catalog
async def cmd_catalog_show(_s: Settings, _args: argparse.Namespace, db: asyncpg.Connection) -> None:
    print(json.dumps((await store.load_snapshot(db)).to_json(), indent=2))


# --- parser --------------------------------------------------------------------------------


def add_parsers(commands: Any) -> None:
    groups = commands.add_parser("groups", help="shard groups").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    groups_list = groups.add_parser("list", help="list groups")
    groups_list.add_argument("--json", action="store_true")
    groups_list.set_defaults(run=cmd_groups_list)
    groups_add = groups.add_parser("add", help="add a group")
    groups_add.add_argument("name")
    groups_add.add_argument("--placement", choices=PLACEMENTS, default="random")
    groups_add.add_argument(
        "--synchronous",
        choices=("on", "off", "default"),
        help="writes wait for a standby (default: audit on, flows off)",
    )
    groups_add.set_defaults(run=cmd_groups_add)
    groups_replication = groups.add_parser(
        "replication", help="whether writes to a group wait for a standby"
    )
    groups_replication.add_argument("name")
    groups_replication.add_argument("synchronous", choices=("on", "off", "default"))
    groups_replication.set_defaults(run=cmd_groups_replication)
    groups_remove = groups.add_parser("remove", help="remove an empty group (no shards, owners)")
    groups_remove.add_argument("name")
    groups_remove.set_defaults(run=cmd_groups_remove)

    shards = commands.add_parser("shards", help="shards").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    shards_list = shards.add_parser("list", help="list shards")
    shards_list.add_argument("--json", action="store_true")
    shards_list.set_defaults(run=cmd_shards_list)
    shards_add = shards.add_parser("add", help="add a shard (probed, checked, migrated, recorded)")
    shards_add.add_argument("name")
    shards_add.add_argument("--group", required=True)
    shards_add.add_argument("--dsn", required=True, help="libpq DSN; multi-host allowed")
    shards_add.add_argument(
        "--force",
        action="store_true",
        help="use a database holding objects shardlog did not create, or the maintenance "
        "database 'postgres' (never the catalog's or another shard's database)",
    )
    shards_add.set_defaults(run=cmd_shards_add)
    for action, state, text in (
        ("drain", "draining", "stop placing new rows on a shard"),
        ("activate", "active", "place rows on a shard again"),
        ("mark-down", "down", "mark a shard down (not probed)"),
    ):
        state_parser = shards.add_parser(action, help=text)
        state_parser.add_argument("name")
        state_parser.set_defaults(run=state_command(state))

    owners = commands.add_parser("owners", help="owner to group mappings").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    owners_show = owners.add_parser("show", help="the group of an owner")
    owners_show.add_argument("kind", choices=OWNER_KINDS)
    owners_show.add_argument("key")
    owners_show.set_defaults(run=cmd_owners_show)
    owners_map = owners.add_parser("map", help="map an owner to a group")
    owners_map.add_argument("kind", choices=OWNER_KINDS)
    owners_map.add_argument("key")
    owners_map.add_argument("group")
    owners_map.add_argument(
        "--tenant", help="the tenant the key belongs to (required for a key not mapped yet)"
    )
    owners_map.add_argument(
        "--force",
        action="store_true",
        help="remap an owner already mapped to another group or tenant",
    )
    owners_map.set_defaults(run=cmd_owners_map)

    catalog = commands.add_parser("catalog", help="the catalog").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    catalog.add_parser("show", help="print the catalog as JSON").set_defaults(run=cmd_catalog_show)
