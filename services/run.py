"""One service at a time, idempotently: the entry point the Ansible roles use on hosts without
systemd (``shardlog_service_manager: process``), built on the controllers of this package.

    python -m services.run start etcd --root DIR --name etcd1 --host H --client-port P --peer-port Q
    python -m services.run start patroni --root DIR --shards JSON --address 10.0.0.5
    python -m services.run reload haproxy --root DIR --host H --stats-port P
    python -m services.run restart collector --root DIR --host H --metrics-port P --env-file F
    python -m services.run stop-all --root DIR

Every command prints one JSON object, ``{"changed": bool, "services": {name: outcome}}``, so that
a task can say ``changed_when: (result.stdout | from_json).changed``: ``start`` is a change only
when something was started (not when it was already running), ``stop`` only when something was
running.

Configuration files are not written here: Ansible renders them from services/templates/ into the
places the controllers read them from (ROOT/etcd/NAME/etcd.conf.yml, ROOT/patroni/NODE/patroni.yml
and postgresql.base.conf, ROOT/haproxy/haproxy.cfg, ROOT/postgres/NAME/data/postgresql.conf).
The layout under ROOT is the one `shardlog up --ha` uses under its data directory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from router.cluster_defaults import DEFAULT_BIN_DIR
from services import process
from services.collector_process import CollectorProcess
from services.credentials import SecretStore
from services.daemon import Daemon
from services.etcd import ETCD_BINARY, EtcdServer
from services.ha_topology import EtcdSpec, NodeSpec
from services.patroni import PATRONI_BINARY, PatroniNode
from services.postgres import InstanceSpec, PostgresInstance
from services.process import OsUser, ServiceError
from services.router_process import RouterProcess
from services.syslog_process import SyslogProcess

Outcomes = dict[str, Any]


class ProvidedConfigInstance(PostgresInstance):
    """A PostgreSQL instance whose postgresql.conf and pg_hba.conf someone else renders."""

    def _write_config(self) -> None:
        return None


@dataclass(frozen=True)
class Context:
    root: Path
    user: OsUser | None
    bin_dir: Path
    timeout: float


# --- one kind of service each: start / stop / reload / status ------------------------------


class Service:
    def start(self) -> Outcomes:
        raise NotImplementedError

    def stop(self) -> Outcomes:
        raise NotImplementedError

    def reload(self) -> Outcomes:
        raise ServiceError(f"{type(self).__name__} has no reload; use restart")

    def status(self) -> Outcomes:
        raise NotImplementedError

    def restart(self) -> Outcomes:
        self.stop()
        return {name: "restarted" for name in self.start()}


class Metadata(Service):
    def __init__(self, ctx: Context, args: argparse.Namespace) -> None:
        spec = InstanceSpec(name=args.name, port=args.port, role="metadata", host=args.host)
        # The superuser's password: ROOT/secrets/shardlog.password (the ansible postgres role
        # puts it there), as under `shardlog up`'s data directory.
        self.instance = ProvidedConfigInstance(
            spec,
            ctx.root / "postgres",
            ctx.user,
            ctx.bin_dir,
            secrets=SecretStore(ctx.root / "secrets"),
        )
        self.timeout = ctx.timeout

    def init(self) -> Outcomes:
        """initdb when there is no cluster yet (Ansible then renders the configuration)."""
        if self.instance.initialized():
            return {self.instance.spec.name: "reused"}
        self.instance.init()
        return {self.instance.spec.name: "initialized"}

    def start(self) -> Outcomes:
        # initdb's own postgresql.conf would start the instance on another port.
        if not self.instance.initialized():
            raise ServiceError(
                f"{self.instance.data_dir} is not initialized: `init metadata`, then render "
                "postgresql.conf and pg_hba.conf into it (the ansible postgres role does)"
            )
        return {self.instance.spec.name: self.instance.start(self.timeout)}

    def stop(self) -> Outcomes:
        return {self.instance.spec.name: _stopped(self.instance.stop(self.timeout))}

    def reload(self) -> Outcomes:
        pid = self.instance.pid()
        if pid is None:
            return {self.instance.spec.name: "not running"}
        os.kill(pid, signal.SIGHUP)
        return {self.instance.spec.name: "reloaded"}

    def status(self) -> Outcomes:
        return {self.instance.spec.name: self.instance.status()}


class Etcd(Service):
    def __init__(self, ctx: Context, args: argparse.Namespace) -> None:
        spec = EtcdSpec(args.name, args.host, args.client_port, args.peer_port)
        self.server = EtcdServer(spec, ctx.root / "etcd", ctx.user)
        self.timeout = ctx.timeout

    def start(self) -> Outcomes:
        binary = shutil.which(ETCD_BINARY) or "/usr/bin/etcd"
        daemon = self.server.daemon
        _require_config(self.server.config_file)
        outcome = daemon.start(
            [binary, "--config-file", self.server.config_file], self.server.ready, self.timeout
        )
        return {daemon.name: outcome}

    def stop(self) -> Outcomes:
        return {self.server.daemon.name: _stopped(self.server.stop(self.timeout))}

    def status(self) -> Outcomes:
        return {self.server.daemon.name: self.server.status()}


class Patroni(Service):
    """The Patroni nodes of this host. Nodes of one shard start in the order given (the first
    one bootstraps the shard, the others clone it); shards start in parallel."""

    def __init__(self, ctx: Context, args: argparse.Namespace) -> None:
        self.timeout = ctx.timeout
        self.nodes = [
            PatroniNode(spec, ctx.root / "patroni", ctx.user, "", ctx.bin_dir)
            for spec in local_nodes(json.loads(args.shards), args.address)
        ]

    def _by_shard(self) -> list[list[PatroniNode]]:
        shards: dict[str, list[PatroniNode]] = {}
        for node in self.nodes:
            shards.setdefault(node.spec.shard, []).append(node)
        return list(shards.values())

    def start(self) -> Outcomes:
        if not Path(PATRONI_BINARY).exists():
            raise ServiceError("patroni not found: install patroni (make install HA=1 does)")

        def start_shard(nodes: list[PatroniNode]) -> Outcomes:
            outcomes: Outcomes = {}
            for node in nodes:
                _require_config(node.config_file)
                command = [sys_python(), PATRONI_BINARY, os.fspath(node.config_file)]
                outcomes[node.spec.name] = node.daemon.start(command, node.healthy, self.timeout)
            return outcomes

        return _merge(_parallel(self._by_shard(), start_shard))

    def stop(self) -> Outcomes:
        def stop_shard(nodes: list[PatroniNode]) -> Outcomes:
            # Replicas first, so that a stopping primary does not fail over to a node about to stop.
            ordered = sorted(nodes, key=lambda node: node.is_primary())
            return {node.spec.name: _stopped(node.stop(self.timeout)) for node in ordered}

        return _merge(_parallel(self._by_shard(), stop_shard))

    def reload(self) -> Outcomes:
        """SIGHUP: Patroni rereads patroni.yml and custom_conf and reloads PostgreSQL."""
        outcomes: Outcomes = {}
        for node in self.nodes:
            pid = node.daemon.pid()
            if pid is None:
                outcomes[node.spec.name] = "not running"
            else:
                os.kill(pid, signal.SIGHUP)
                outcomes[node.spec.name] = "reloaded"
        return outcomes

    def status(self) -> Outcomes:
        return {node.spec.name: node.status() for node in self.nodes}


class HAProxy(Service):
    def __init__(self, ctx: Context, args: argparse.Namespace) -> None:
        self.home = ctx.root / "haproxy"
        self.host = args.host
        self.stats_port = args.stats_port
        self.daemon = Daemon("haproxy", self.home, ctx.user, marker="haproxy")
        self.timeout = ctx.timeout

    @property
    def config_file(self) -> Path:
        return self.home / "haproxy.cfg"

    def ready(self) -> bool:
        return process.port_in_use(self.host, self.stats_port)

    def start(self) -> Outcomes:
        binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
        _require_config(self.config_file)
        # -W master-worker, -db in the foreground: we hold the PID and the log.
        command = [binary, "-W", "-db", "-f", os.fspath(self.config_file)]
        return {"haproxy": self.daemon.start(command, self.ready, self.timeout)}

    def stop(self) -> Outcomes:
        return {"haproxy": _stopped(self.daemon.stop(self.timeout))}

    def reload(self) -> Outcomes:
        """SIGUSR2 to the master: new workers read the new file, old ones finish their sessions."""
        pid = self.daemon.pid()
        if pid is None:
            return {"haproxy": "not running"}
        os.kill(pid, signal.SIGUSR2)
        return {"haproxy": "reloaded"}

    def status(self) -> Outcomes:
        return {"haproxy": self.daemon.status("haproxy", f"{self.host}:{self.stats_port} (stats)")}


class Router(Service):
    def __init__(self, ctx: Context, args: argparse.Namespace) -> None:
        env = read_env_file(Path(args.env_file)) if args.env_file else {}
        ca_file = Path(args.ca_file) if args.ca_file else None
        self.router = RouterProcess(ctx.root, args.host, args.port, env, ca_file)
        self.timeout = ctx.timeout

    def start(self) -> Outcomes:
        # Settings come from the environment file alone, not from whoever runs this command.
        for key in [k for k in os.environ if k.startswith("SHARDLOG_")]:
            del os.environ[key]
        return {"router": self.router.start(self.timeout)}

    def stop(self) -> Outcomes:
        return {"router": _stopped(self.router.stop(self.timeout))}

    def status(self) -> Outcomes:
        return {"router": self.router.status()}


class Collector(Service):
    """`shardlog collector`, ready when /health answers on --host:--metrics-port; its settings
    come from the environment file alone (the process gets no other SHARDLOG_* variable)."""

    def __init__(self, ctx: Context, args: argparse.Namespace) -> None:
        env = read_env_file(Path(args.env_file)) if args.env_file else {}
        # Its /health is asked where it listens; on every interface, on loopback.
        probe = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(args.host, args.host)  # noqa: S104
        self.collector = CollectorProcess(ctx.root, probe, args.metrics_port, env)
        self.timeout = ctx.timeout

    def start(self) -> Outcomes:
        return {"collector": self.collector.start(self.timeout)}

    def stop(self) -> Outcomes:
        return {"collector": _stopped(self.collector.stop(self.timeout))}

    def status(self) -> Outcomes:
        return {"collector": self.collector.status()}


SERVICES: dict[str, Callable[[Context, argparse.Namespace], Service]] = {
    "metadata": Metadata,
    "etcd": Etcd,
    "patroni": Patroni,
    "haproxy": HAProxy,
    "router": Router,
    "collector": Collector,
}


# --- helpers -------------------------------------------------------------------------------


def sys_python() -> str:
    """Debian's interpreter: Patroni is a Debian package, not part of our virtualenv."""
    return shutil.which("python3", path="/usr/bin") or "/usr/bin/python3"


def local_nodes(shards: list[dict[str, Any]], address: str | None) -> list[NodeSpec]:
    """The nodes of ``shards`` (the inventory's shardlog_shards) whose host is ``address``
    (every node when it is None), in order."""
    return [
        NodeSpec(
            name=str(node["name"]),
            shard=str(shard["name"]),
            host=str(node["host"]),
            port=int(node["port"]),
            rest_port=int(node["rest_port"]),
        )
        for shard in shards
        for node in shard["nodes"]
        if address is None or node["host"] == address
    ]


def _require_config(path: Path) -> None:
    if not path.exists():
        raise ServiceError(f"{path} is missing: it is rendered by the ansible role first")


def _stopped(was_running: bool) -> str:
    return "stopped" if was_running else "not running"


def _parallel(
    groups: list[list[PatroniNode]], action: Callable[[list[PatroniNode]], Outcomes]
) -> list[Outcomes]:
    with ThreadPoolExecutor(max_workers=max(1, len(groups))) as pool:
        return list(pool.map(action, groups))


def _merge(parts: list[Outcomes]) -> Outcomes:
    merged: Outcomes = {}
    for part in parts:
        merged.update(part)
    return merged


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines, as systemd's EnvironmentFile= reads them (no quoting, # comments)."""
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            env[key.strip()] = value.strip()
    return env


CHANGES = {"started", "restarted", "stopped", "reloaded", "initialized"}


def changed(outcomes: Outcomes) -> bool:
    return any(isinstance(v, str) and v in CHANGES for v in outcomes.values())


# --- stop-all: everything under a root, found by its pid files -----------------------------


def stop_all(ctx: Context) -> Outcomes:
    """Stop every process this layout recorded under ``root``, the collector, the syslog
    listener and the router first and the metadata instance last; a pid file whose process is
    gone or is not ours is ignored."""
    root = ctx.root
    outcomes: Outcomes = {}
    for helper in (
        CollectorProcess(root, "127.0.0.1", 0, {}),
        SyslogProcess(root, "127.0.0.1", 0, {}),
    ):
        if helper.pid() is not None:
            outcomes[helper.command] = _stopped(helper.stop(ctx.timeout))
    router = RouterProcess(root, "127.0.0.1", 0)
    outcomes["router"] = _stopped(router.stop(ctx.timeout))
    haproxy = Daemon("haproxy", root / "haproxy", ctx.user, marker="haproxy")
    if haproxy.pid_file.exists():
        outcomes["haproxy"] = _stopped(haproxy.stop(ctx.timeout))
    for home in sorted(p for p in (root / "patroni").glob("*") if p.is_dir()):
        spec = NodeSpec(name=home.name, shard="", host="127.0.0.1", port=0, rest_port=0)
        node = PatroniNode(spec, root / "patroni", ctx.user, "", ctx.bin_dir)
        outcomes[home.name] = _stopped(node.stop(ctx.timeout))
    for home in sorted(p for p in (root / "etcd").glob("*") if p.is_dir()):
        daemon = Daemon(home.name, home, ctx.user, marker="etcd")
        outcomes[home.name] = _stopped(daemon.stop(ctx.timeout))
    for home in sorted(p for p in (root / "postgres").glob("*") if p.is_dir()):
        instance_spec = InstanceSpec(name=home.name, port=0, role="metadata")
        instance = PostgresInstance(instance_spec, root / "postgres", ctx.user, ctx.bin_dir)
        outcomes[home.name] = _stopped(instance.stop(ctx.timeout))
    return outcomes


# --- the command line ----------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m services.run", description=__doc__.split("\n\n")[0]
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action in ("start", "stop", "restart", "reload", "status", "init"):
        kinds = actions.add_parser(action).add_subparsers(
            dest="kind", required=True, metavar="KIND"
        )
        for kind in SERVICES if action != "init" else ("metadata",):
            sub = kinds.add_parser(kind)
            _common(sub)
            _kind_options(sub, kind)
    stop_everything = actions.add_parser(
        "stop-all", help="stop every process recorded under --root"
    )
    _common(stop_everything)
    return parser


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root", type=Path, required=True, help="data root (ROOT/etcd, ROOT/patroni, ...)"
    )
    parser.add_argument("--user", default="postgres", help="server user when run as root")
    parser.add_argument("--bin-dir", type=Path, default=DEFAULT_BIN_DIR)
    parser.add_argument("--timeout", type=float, default=90.0, help="readiness deadline, seconds")


def _kind_options(parser: argparse.ArgumentParser, kind: str) -> None:
    if kind in ("metadata", "etcd", "haproxy", "router", "collector"):
        parser.add_argument("--host", default="127.0.0.1")
    if kind == "metadata":
        parser.add_argument("--name", default="metadata")
        parser.add_argument("--port", type=int, required=True)
    elif kind == "etcd":
        parser.add_argument("--name", default="etcd1")
        parser.add_argument("--client-port", type=int, required=True)
        parser.add_argument("--peer-port", type=int, required=True)
    elif kind == "patroni":
        parser.add_argument(
            "--shards",
            required=True,
            help='JSON list of {"name", "nodes": [{"name", "host", "port", "rest_port"}]}, '
            "the first node of a shard first",
        )
        parser.add_argument("--address", help="only the nodes whose host is this address")
    elif kind == "haproxy":
        parser.add_argument("--stats-port", type=int, required=True)
    elif kind == "router":
        parser.add_argument("--port", type=int, required=True)
        parser.add_argument("--env-file", help="SHARDLOG_* settings, KEY=VALUE per line")
        parser.add_argument(
            "--ca-file", help="the router serves HTTPS: its certificate's CA, for health checks"
        )
    elif kind == "collector":
        parser.add_argument(
            "--metrics-port", type=int, required=True, help="where its /health answers"
        )
        parser.add_argument("--env-file", help="SHARDLOG_* settings, KEY=VALUE per line")


def run(argv: Sequence[str] | None = None) -> Outcomes:
    args = build_parser().parse_args(argv)
    ctx = Context(
        root=args.root.absolute(),
        user=process.server_user(args.user),
        bin_dir=args.bin_dir,
        timeout=args.timeout,
    )
    if args.action == "stop-all":
        return stop_all(ctx)
    service = SERVICES[args.kind](ctx, args)
    if args.action == "init":
        assert isinstance(service, Metadata)
        return service.init()
    action: Callable[[], Outcomes] = getattr(service, args.action)
    return action()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        outcomes = run(argv)
    except (ServiceError, OSError, ValueError, KeyError) as exc:
        print(json.dumps({"changed": False, "error": str(exc)}))
        print(f"services.run: error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"changed": changed(outcomes), "services": outcomes}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
