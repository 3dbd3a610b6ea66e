#!/opt/shardlog/.venv/bin/python
"""The entry point of every container of docker-compose.yml: render the service's configuration
from services/templates/ (mounted from the checkout: the files the Ansible roles render), then
run the service in the foreground as the container's main process.

    shardlog-entrypoint metadata | etcd | patroni NODE | haproxy | schema | router | collector
    shardlog-entrypoint health metadata | etcd | patroni NODE | haproxy | router | collector

SHARDLOG_RENDER lists what to render, `TEMPLATE:DESTINATION` separated by spaces. The topology is
services.ha_topology.build_ha_topology with the SHARDLOG_COMPOSE_* numbers (the port plan of
`make up HA=1` and of the Ansible localhost inventory); each service is reached by its compose
name (metadata, etcd1, shard01-a, haproxy).
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

from router.cluster_defaults import DATABASE, DEFAULT_BIN_DIR, SUPERUSER
from services.credentials import CATALOG_ROLE, ROUTER_ROLES, SecretStore
from services.ha_topology import HaTopology, NodeSpec, build_ha_topology
from services.templates import render

HOME = Path("/var/lib/shardlog")
EVERYWHERE = ["0.0.0.0/0", "::/0"]  # the compose network; nothing else reaches the containers
# For trying shardlog out only (docs/deployment.md): the compose network is trusted, where
# `shardlog up` and the Ansible roles ask every connection for a password.
TRUST = {"host_auth": "trust", "local_auth": "trust"}
EVERY_INTERFACE = "0.0.0.0"  # noqa: S104 - inside the compose network


def topology() -> HaTopology:
    env = os.environ
    plan = build_ha_topology(
        int(env.get("SHARDLOG_COMPOSE_SHARDS", "4")),
        int(env.get("SHARDLOG_COMPOSE_GROUPS", "2")),
        int(env.get("SHARDLOG_COMPOSE_NODES", "2")),
        int(env.get("SHARDLOG_COMPOSE_BASE_PORT", "26432")),
    )
    shards = tuple(
        replace(shard, nodes=tuple(replace(node, host=node.name) for node in shard.nodes))
        for shard in plan.shards
    )
    return replace(
        plan,
        shards=shards,
        metadata=replace(plan.metadata, host="metadata"),
        etcd=replace(plan.etcd, host="etcd1"),
        host="haproxy",
    )


def router_port() -> int:
    return int(os.environ.get("SHARDLOG_COMPOSE_ROUTER_PORT", "8080"))


def collector_metrics_port() -> int:
    return int(os.environ.get("SHARDLOG_COLLECTOR__METRICS_PORT", "9740"))


def node(plan: HaTopology, name: str) -> NodeSpec:
    for candidate in plan.nodes:
        if candidate.name == name:
            return candidate
    raise SystemExit(f"no node {name!r} in the topology ({[n.name for n in plan.nodes]})")


def render_all(variables: dict[str, Any]) -> None:
    for item in os.environ.get("SHARDLOG_RENDER", "").split():
        template, destination = item.split(":", 1)
        Path(destination).write_text(render(template, **variables))
        print(f"rendered {template} -> {destination}", flush=True)


def run_foreground(command: list[str]) -> None:
    sys.stdout.flush()
    os.execvp(command[0], command)  # noqa: S606 - the container's main process


# --- services --------------------------------------------------------------------------------


def metadata(plan: HaTopology) -> None:
    data = HOME / "data"
    if not (data / "PG_VERSION").exists():
        subprocess.run(
            [
                str(DEFAULT_BIN_DIR / "initdb"),
                "-D",
                str(data),
                f"--username={SUPERUSER}",
                "--encoding=UTF8",
                "--locale=C",
                "--auth=trust",
            ],
            check=True,
        )
    render_all(
        {
            "port": plan.metadata.port,
            "listen_addresses": "*",
            "allowed_networks": EVERYWHERE,
            **TRUST,
        }
    )
    run_foreground([str(DEFAULT_BIN_DIR / "postgres"), "-D", str(data)])


def etcd(plan: HaTopology) -> None:
    spec = plan.etcd
    render_all(
        {
            "member_name": spec.name,
            "data_dir": str(HOME / "data"),
            "host": spec.host,
            "listen_host": EVERY_INTERFACE,
            "client_port": spec.client_port,
            "peer_port": spec.peer_port,
        }
    )
    run_foreground(["etcd", "--config-file", str(HOME / "etcd.conf.yml")])


def patroni(plan: HaTopology, name: str) -> None:
    spec = node(plan, name)
    render_all(
        {
            "scope": spec.shard,
            "node_name": spec.name,
            "host": spec.host,
            "port": spec.port,
            "listen_addresses": spec.host,
            "rest_port": spec.rest_port,
            "etcd_hosts": f"{plan.etcd.host}:{plan.etcd.client_port}",
            "data_dir": str(HOME / "data"),
            "bin_dir": str(DEFAULT_BIN_DIR),
            "home": str(HOME),
            "custom_conf": str(HOME / "postgresql.base.conf"),
            "allowed_networks": EVERYWHERE,
            **TRUST,
        }
    )
    run_foreground(["/usr/bin/python3", "/usr/bin/patroni", str(HOME / "patroni.yml")])


def haproxy(plan: HaTopology) -> None:
    render_all({"host": EVERY_INTERFACE, "stats_port": plan.stats_port, "shards": plan.shards})
    run_foreground(["haproxy", "-W", "-db", "-f", str(HOME / "haproxy.cfg")])


def psql(dsn: str, sql: str) -> str:
    result = subprocess.run(
        ["psql", "-X", "-qAt", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-c", sql],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return result.stdout.strip()


def ensure_database(hosts: str, deadline: float) -> None:
    """``DATABASE`` on the server (a shard's primary) at ``hosts``, waiting until it answers."""
    dsn = f"postgresql://{SUPERUSER}@{hosts}/postgres?target_session_attrs=read-write"
    while True:
        try:
            found = psql(dsn, f"SELECT count(*) FROM pg_database WHERE datname = '{DATABASE}'")
            if found == "0":
                psql(dsn, f"CREATE DATABASE {DATABASE}")
                print(f"created {DATABASE} on {hosts}", flush=True)
            return
        except subprocess.CalledProcessError as exc:
            if time.monotonic() > deadline:
                raise SystemExit(f"{hosts} did not answer: {exc.stderr}") from exc
            time.sleep(2)


def schema(plan: HaTopology) -> None:
    """Once: every database, the migrations, the groups and shards in the catalog."""
    from router import bootstrap
    from router.settings import Settings

    deadline = time.monotonic() + 300
    ensure_database(f"{plan.metadata.host}:{plan.metadata.port}", deadline)
    for shard in plan.shards:
        ensure_database(",".join(f"{n.host}:{n.port}" for n in shard.nodes), deadline)
    # The catalog and shard roles get passwords all the same (router/db/roles.py needs them);
    # the router's connections, trusted here, do without.
    passfile = SecretStore(HOME / "secrets").ensure((CATALOG_ROLE, *ROUTER_ROLES))
    os.environ.setdefault("SHARDLOG_POOLS__PASSFILE", str(passfile))
    settings = Settings()
    asyncio.run(bootstrap.migrate_all(settings))
    added = asyncio.run(bootstrap.register_topology(settings, plan))
    asyncio.run(bootstrap.migrate_all(settings))
    print(f"catalog ready; shards added: {', '.join(added) or 'none'}", flush=True)


def router(_plan: HaTopology) -> None:
    run_foreground(
        [
            "/opt/shardlog/.venv/bin/shardlog",
            "serve",
            "--host",
            EVERY_INTERFACE,
            "--port",
            str(router_port()),
        ]
    )


def collector(_plan: HaTopology) -> None:
    """Its ports and state file from SHARDLOG_COLLECTOR__* (the compose file sets them); it
    listens on every interface of the container unless told otherwise."""
    os.environ.setdefault("SHARDLOG_COLLECTOR__HOST", EVERY_INTERFACE)
    run_foreground(["/opt/shardlog/.venv/bin/shardlog", "collector"])


# --- health checks (the compose healthcheck of each service) --------------------------------


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def healthy(plan: HaTopology, role: str, name: str | None) -> bool:
    if role == "metadata":
        ready = [str(DEFAULT_BIN_DIR / "pg_isready"), "-q", "-h", "metadata"]
        ready += ["-p", str(plan.metadata.port)]
        return subprocess.run(ready, check=False).returncode == 0
    if role == "etcd":
        return http_ok(f"{plan.etcd.client_url}/health")
    if role == "patroni" and name is not None:
        return http_ok(f"{node(plan, name).rest_url}/health")
    if role == "haproxy":
        with socket.socket() as probe:
            probe.settimeout(2)
            return probe.connect_ex(("127.0.0.1", plan.stats_port)) == 0
    if role == "router":
        return http_ok(f"http://127.0.0.1:{router_port()}/health/ready")
    if role == "collector":
        return http_ok(f"http://127.0.0.1:{collector_metrics_port()}/health")
    raise SystemExit(f"unknown service {role!r}")


def main(argv: list[str]) -> int:
    plan = topology()
    if not argv:
        raise SystemExit(__doc__)
    role, rest = argv[0], argv[1:]
    if role == "health":
        return 0 if healthy(plan, rest[0], rest[1] if len(rest) > 1 else None) else 1
    if role == "patroni":
        patroni(plan, rest[0])
    elif role in ("metadata", "etcd", "haproxy", "schema", "router", "collector"):
        {
            "metadata": metadata,
            "etcd": etcd,
            "haproxy": haproxy,
            "schema": schema,
            "router": router,
            "collector": collector,
        }[role](plan)
    else:
        run_foreground(argv)  # anything else: a shell, psql, patronictl ...
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
