"""The `shardlog` command: run a local cluster, migrate, serve, and administer the catalog."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import asyncpg

from router import bootstrap, cli_auth, cli_lifecycle, cli_report, local_tls
from router.auth import bootstrap as auth_bootstrap
from router.catalog import shards as shard_admin
from router.catalog import store
from router.catalog.snapshot import OWNER_KINDS, PLACEMENTS, shard_json
from router.cli_output import output, print_table
from router.db import catalog_login
from router.db.migrate import MigrationError
from router.errors import ShardlogError
from router.settings import Settings
from services.cluster import LocalCluster
from services.ha_cluster import HaCluster
from services.ha_topology import build_ha_topology
from services.process import ServiceError, server_user
from services.router_process import RouterProcess
from services.topology import build_topology


def _ha_recorded(settings: Settings) -> bool:
    """`make up HA=1` leaves a mark, so `make down` and `make status` find the HA processes
    without being told again."""
    return (settings.cluster.data_dir / HA_MARK).exists()


HA_MARK = "ha-topology"


def local_cluster(settings: Settings, ha: bool | None = None) -> LocalCluster | HaCluster:
    cluster = settings.cluster
    user = server_user(cluster.server_user)
    tls = local_tls.postgres_settings(settings)
    if ha if ha is not None else (cluster.ha or _ha_recorded(settings)):
        ha_topology = build_ha_topology(
            cluster.ha_shards, cluster.groups, cluster.ha_nodes, cluster.base_port, cluster.host
        )
        return HaCluster(
            ha_topology,
            cluster.data_dir,
            user,
            cluster.bin_dir,
            local_tls.postgres_settings(settings),
        )
    topology = build_topology(cluster.shards, cluster.groups, cluster.base_port, cluster.host)
    return LocalCluster(topology, cluster.data_dir, user, cluster.bin_dir, tls)


def router_process(settings: Settings) -> RouterProcess:
    ca_file = local_tls.authority(settings).cert if local_tls.recorded(settings) else None
    return RouterProcess(
        settings.cluster.data_dir, settings.server.host, settings.server.port, ca_file=ca_file
    )


# --- local cluster -------------------------------------------------------------------------


def cmd_up(settings: Settings, args: argparse.Namespace) -> int:
    if args.tls or local_tls.recorded(settings):
        settings = local_tls.prepare(settings, server_user(settings.cluster.server_user))
    ha = bool(args.ha or settings.cluster.ha or _ha_recorded(settings))
    cluster = local_cluster(settings, ha)
    if isinstance(cluster, HaCluster):
        settings.cluster.data_dir.mkdir(parents=True, exist_ok=True)
        (settings.cluster.data_dir / HA_MARK).write_text("patroni + etcd + haproxy\n")
    outcomes = cluster.start(settings.cluster.start_timeout_s)
    asyncio.run(bootstrap.migrate_all(settings))
    added = asyncio.run(bootstrap.register_topology(settings, cluster.topology))
    asyncio.run(bootstrap.migrate_all(settings))
    token_files = asyncio.run(auth_bootstrap.ensure_local_tokens(settings, "shardlog up"))
    rows = [{**s, "outcome": outcomes[s["name"]]} for s in cluster.status()]
    print_table(rows, ["name", "role", "group", "address", "pid", "outcome", "log"])
    if added:
        print(f"registered {len(added)} shards in the catalog: {', '.join(added)}")
    if not args.no_router:
        router = router_process(settings)
        outcome = router.start()
        print(f"router {outcome}: {router.url} (pid {router.pid()}, log {router.log_file})")
        cacert = f"--cacert {router.ca_file} " if router.ca_file else ""
        print(f"  readiness: curl {cacert}{router.url}/health/ready   API docs: {router.url}/docs")
    if isinstance(cluster, HaCluster):
        host = cluster.topology.host
        for shard in cluster.topology.shards:
            print(
                f"{shard.name}: {shard.dsn()}  (HAProxy write {host}:{shard.write_port}, "
                f"read {host}:{shard.read_port})"
            )
        print(f"HAProxy stats: http://{host}:{cluster.topology.stats_port}/")
    print(f"metadata DSN: {settings.metadata_dsn()}")
    _print_tokens(settings, token_files)
    print(
        "stop everything with `make down` (data stays in "
        f"{settings.cluster.data_dir}; `make clean` removes it)"
    )
    return 0


def _print_tokens(settings: Settings, files: list[auth_bootstrap.TokenFile]) -> None:
    for file in files:
        print(
            f"{file.label} token ({file.outcome}; tenant {file.tenant}: "
            f"{', '.join(file.scopes)}): {file.path} (readable by you only)"
        )
    if settings.auth.mode == "open":
        print("WARNING: SHARDLOG_AUTH__MODE=open: the router asks no one for a token")
    else:
        router = router_process(settings)
        cacert = f"--cacert {router.ca_file} " if router.ca_file else ""
        print(
            f'  e.g. curl {cacert}-H "Authorization: Bearer $(cat '
            f"{files[-1].path})\" '{router.url}/v1/audit/search?owner=...&from=...&to=...'"
        )


def cmd_down(settings: Settings, _args: argparse.Namespace) -> int:
    router = router_process(settings)
    if router.stop():
        print("router stopped")
    stopped = local_cluster(settings).stop()
    print(f"stopped {sum(stopped.values())} server processes")
    return 0


def cmd_status(settings: Settings, _args: argparse.Namespace) -> int:
    cluster = local_cluster(settings)
    print_table(cluster.status(), ["name", "role", "group", "address", "pid", "running"])
    router = router_process(settings).status()
    print(
        f"router: {'running' if router['running'] else 'stopped'} at {router['url']}"
        f" (pid {router['pid'] or '-'})"
    )
    return 0


def cmd_clean(settings: Settings, args: argparse.Namespace) -> int:
    cmd_down(settings, args)
    shutil.rmtree(settings.cluster.data_dir, ignore_errors=True)
    print(f"removed {settings.cluster.data_dir}")
    return 0


def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn

    from router.app import create_app
    from router.http import tls
    from router.http.limits import connection_limits
    from router.http.protocol import protocol_factory

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    server = settings.server
    host = args.host or server.host
    port = args.port or server.port
    options: dict[str, Any] = {}
    if server.tls_cert_file is not None and server.tls_key_file is not None:
        tls.server_context(server.tls_cert_file, server.tls_key_file)  # fails here, clearly
        options["ssl_context_factory"] = tls.context_factory(
            server.tls_cert_file, server.tls_key_file
        )
        options["loop"] = tls.LOOP
    tls.warn_if_plain(host, bool(options))
    # Deadlines for slow clients and the connection cap (uvicorn enforces neither).
    options["http"] = protocol_factory(connection_limits(server))
    if server.workers == 1:
        uvicorn.run(
            create_app(settings),
            host=host,
            port=port,
            log_level="info",
            timeout_keep_alive=server.keep_alive_timeout_s,
            **options,
        )
    else:
        # Worker processes build their app from the same SHARDLOG_* environment; the protocol
        # and TLS context factories are pickled into them.
        uvicorn.run(
            "router.app:create_app",
            factory=True,
            workers=server.workers,
            host=host,
            port=port,
            log_level="info",
            timeout_keep_alive=server.keep_alive_timeout_s,
            **options,
        )
    return 0


def cmd_migrate(settings: Settings, _args: argparse.Namespace) -> int:
    report = asyncio.run(bootstrap.migrate_all(settings))
    print(f"metadata: {', '.join(report.catalog_role + report.metadata) or 'up to date'}")
    for name, applied in sorted(report.shards.items()):
        changes = report.roles.get(name, []) + applied
        print(f"{name}: {', '.join(changes) or 'up to date'}")
    for name, why in sorted(report.skipped.items()):
        print(f"{name}: skipped ({why})")
    for name, other in sorted(report.clashes.items()):
        print(
            f"shardlog: warning: shards {other} and {name} reach the same database; two "
            "shards must never share one (searches would read it twice)",
            file=sys.stderr,
        )
    return 0


# --- catalog administration ----------------------------------------------------------------


def with_metadata(
    action: Callable[[Settings, argparse.Namespace, asyncpg.Connection], Awaitable[None]],
) -> Callable[[Settings, argparse.Namespace], int]:
    def run(settings: Settings, args: argparse.Namespace) -> int:
        async def go() -> None:
            connection = await catalog_login.connect(settings)
            try:
                await action(settings, args, connection)
            finally:
                await connection.close()

        asyncio.run(go())
        return 0

    return run


@with_metadata
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


@with_metadata
async def cmd_groups_add(s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    group = await store.add_group(db, args.name, args.placement, _replication(args.synchronous))
    print(f"added group {group.name} (placement {group.placement})")
    await cli_auth.record(
        s, "group.add", group.name, placement=group.placement, synchronous=group.synchronous
    )


def _replication(choice: str | None) -> bool | None:
    return {"on": True, "off": False}.get(choice or "default")


@with_metadata
async def cmd_groups_replication(
    s: Settings, args: argparse.Namespace, db: asyncpg.Connection
) -> None:
    group = await store.set_group_replication(db, args.name, _replication(args.synchronous))
    shown = {True: "on", False: "off", None: "default (audit on, flows off)"}[group.synchronous]
    print(f"group {group.name}: synchronous replication {shown}")
    await cli_auth.record(s, "group.replication", group.name, synchronous=group.synchronous)


@with_metadata
async def cmd_shards_list(_s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    shards = (await store.load_snapshot(db)).to_json()["shards"]
    output(args, shards, lambda: print_table(shards, ["name", "group", "state", "dsn"]))


@with_metadata
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
    @with_metadata
    async def command(s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
        shard = await store.set_shard_state(db, args.name, state)
        print(f"shard {shard.name} is now {shard.state}")
        await cli_auth.record(s, "shard.state", shard.name, state=shard.state)

    return command


@with_metadata
async def cmd_owners_show(_s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    mapping = await store.get_owner(db, args.kind, args.key)
    if mapping is None:
        raise ShardlogError(f"{args.kind} owner {args.key!r} is not mapped yet", "key")
    print(
        f"{mapping.kind} {mapping.key!r} -> {mapping.group} ({mapping.assigned_by}), "
        f"tenant {mapping.tenant}"
    )


@with_metadata
async def cmd_owners_map(s: Settings, args: argparse.Namespace, db: asyncpg.Connection) -> None:
    mapping = await store.map_owner(
        db, args.kind, args.key, args.group, args.tenant, force=args.force
    )
    print(f"{mapping.kind} {mapping.key!r} -> {mapping.group}, tenant {mapping.tenant}")
    await cli_auth.record(
        s,
        "owner.map",
        f"{mapping.kind} {mapping.key}",
        group=mapping.group,
        tenant=mapping.tenant,
        force=args.force,
    )


@with_metadata
async def cmd_catalog_show(_s: Settings, _args: argparse.Namespace, db: asyncpg.Connection) -> None:
    print(json.dumps((await store.load_snapshot(db)).to_json(), indent=2))


# --- parser --------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="shardlog", description="Sharded audit-log and flow storage on PostgreSQL."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    up = commands.add_parser("up", help="start the local cluster and the router")
    up.add_argument("--no-router", action="store_true", help="start PostgreSQL only")
    up.add_argument(
        "--ha",
        action="store_true",
        help="Patroni primary + replica per shard, etcd and HAProxy (kept until `make clean`)",
    )
    up.add_argument(
        "--tls",
        action="store_true",
        help="TLS everywhere: PostgreSQL over TLS only, the router on HTTPS, certificates "
        "verified against a local CA (kept until `make clean`)",
    )
    up.set_defaults(run=cmd_up)
    commands.add_parser("down", help="stop the router and the local cluster").set_defaults(
        run=cmd_down
    )
    commands.add_parser("status", help="what runs where").set_defaults(run=cmd_status)
    commands.add_parser("clean", help="stop everything and remove the data directory").set_defaults(
        run=cmd_clean
    )
    commands.add_parser(
        "migrate", help="migrate the metadata database and every shard"
    ).set_defaults(run=cmd_migrate)
    serve = commands.add_parser("serve", help="run the router in the foreground")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.set_defaults(run=cmd_serve)

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
    cli_lifecycle.add_parsers(commands)
    cli_auth.add_parsers(commands)
    cli_report.add_parsers(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = local_tls.apply(Settings())
        code: int = args.run(settings, args)
    except ShardlogError as exc:
        where = f" ({exc.field})" if exc.field else ""
        print(f"shardlog: error{where}: {exc.message}", file=sys.stderr)
        return 2
    except (
        ServiceError,
        MigrationError,
        ValueError,
        RuntimeError,
        OSError,
        asyncpg.PostgresError,
    ) as exc:
        print(f"shardlog: error: {exc}", file=sys.stderr)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
