"""`shardlog up|down|status|clean|migrate|serve`: the local cluster and the router process."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import sys
from typing import Any

from router import bootstrap
from router.auth import bootstrap as auth_bootstrap
from router.cli import local_tls
from router.cli.output import print_table
from router.settings import Settings
from services.cluster import LocalCluster
from services.collector_process import CollectorProcess
from services.ha_cluster import HaCluster
from services.ha_topology import build_ha_topology
from services.process import server_user
from services.router_process import RouterProcess
from services.syslog_process import SyslogProcess
from services.topology import build_topology


def _ha_recorded(settings: Settings) -> bool:
    """`make up HA=1` leaves a mark, so `make down` and `make status` find the HA processes
    without being told again."""
    return (settings.cluster.data_dir / HA_MARK).exists()


HA_MARK = "ha-topology"


def local_cluster(
    settings: Settings, ha: bool | None = None, parameters: dict[str, Any] | None = None
) -> LocalCluster | HaCluster:
    """The local cluster of ``settings``; ``parameters`` override postgresql.conf values of
    every instance (e.g. shared_buffers, for a benchmark)."""
    cluster = settings.cluster
    user = server_user(cluster.server_user)
    postgres = {**local_tls.postgres_settings(settings), **(parameters or {})}
    if ha if ha is not None else (cluster.ha or _ha_recorded(settings)):
        ha_topology = build_ha_topology(
            cluster.ha_shards, cluster.groups, cluster.ha_nodes, cluster.base_port, cluster.host
        )
        return HaCluster(
            ha_topology,
            cluster.data_dir,
            user,
            cluster.bin_dir,
            postgres,
        )
    topology = build_topology(cluster.shards, cluster.groups, cluster.base_port, cluster.host)
    return LocalCluster(topology, cluster.data_dir, user, cluster.bin_dir, postgres)


def collector_process(settings: Settings) -> CollectorProcess:
    """The collector runs with this command's SHARDLOG_* settings (and password file)."""
    env = {k: v for k, v in os.environ.items() if k.startswith("SHARDLOG_") or k == "PGPASSFILE"}
    collector = settings.collector
    return CollectorProcess(
        settings.cluster.data_dir, collector.host, collector.metrics_port, env=env
    )


def syslog_process(settings: Settings) -> SyslogProcess:
    """The syslog listener runs with this command's SHARDLOG_* settings (and password file)."""
    env = {k: v for k, v in os.environ.items() if k.startswith("SHARDLOG_") or k == "PGPASSFILE"}
    syslog = settings.syslog
    return SyslogProcess(settings.cluster.data_dir, syslog.host, syslog.metrics_port, env=env)


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
        if not args.no_collector:
            _start_collector(settings)
        if not args.no_syslog:
            _start_syslog(settings)
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


def _start_collector(settings: Settings) -> None:
    collector = collector_process(settings)
    outcome = collector.start()
    c = settings.collector
    print(
        f"collector {outcome}: NetFlow v5/v9 and IPFIX on udp {c.host}:{c.netflow_port}, IPFIX "
        f"on udp and tcp {c.host}:{c.ipfix_port} (pid {collector.pid()}, log "
        f"{collector.log_file}); metrics: {collector.metrics_url}/metrics"
    )


def _start_syslog(settings: Settings) -> None:
    listener = syslog_process(settings)
    outcome = listener.start()
    s = settings.syslog
    print(
        f"syslog listener {outcome}: udp and tcp {s.host}:{s.udp_port}/{s.tcp_port} (pid "
        f"{listener.pid()}, log {listener.log_file}); metrics: {listener.metrics_url}/metrics"
    )
    # Nothing is mapped for the operator: any local user can send to loopback, and messages
    # are written as the tenant of their sender's mapping.
    print(
        "  it refuses senders without a mapping: `shardlog syslog-senders set 127.0.0.1 "
        "--tenant <tenant>` lets this host's senders write as that tenant"
    )


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
    if syslog_process(settings).stop():
        print("syslog listener stopped")
    if collector_process(settings).stop():
        print("collector stopped")
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
    collector = collector_process(settings).status()
    print(
        f"collector: {'running' if collector['running'] else 'stopped'} "
        f"(metrics {collector['address']}, pid {collector['pid'] or '-'})"
    )
    listener = syslog_process(settings).status()
    print(
        f"syslog: {'running' if listener['running'] else 'stopped'} "
        f"(metrics {listener['address']}, pid {listener['pid'] or '-'})"
    )
    return 0


def cmd_clean(settings: Settings, args: argparse.Namespace) -> int:
    cmd_down(settings, args)
    shutil.rmtree(settings.cluster.data_dir, ignore_errors=True)
    print(f"removed {settings.cluster.data_dir}")
    return 0


def cmd_serve(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn

    from router.app import LOG_FORMAT, create_app
    from router.http import tls
    from router.http.limits import connection_limits
    from router.http.protocol import protocol_factory

    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
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
            access_log=False,  # the router writes its own (router/http/observe.py)
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
            access_log=False,  # the router writes its own (router/http/observe.py)
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


def add_parsers(commands: Any) -> None:
    up = commands.add_parser("up", help="start the local cluster and the router")
    up.add_argument("--no-router", action="store_true", help="start PostgreSQL only")
    up.add_argument("--no-collector", action="store_true", help="start no NetFlow/IPFIX collector")
    up.add_argument("--no-syslog", action="store_true", help="start no syslog listener")
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
