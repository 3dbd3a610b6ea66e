"""ansible/site.yml and verify.yml against this host (connection: local, services started by
`python -m services.run`): a small HA topology (1 group, 2 shards x 2 Patroni nodes, etcd,
HAProxy, the metadata instance, the router and the collector) comes up with shardlog_tls on, a
second run changes nothing, verify passes, and stop.yml stops every process the playbooks
started."""

from __future__ import annotations

import json
import os
import random
import re
import ssl
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from services.ha_topology import HaTopology, build_ha_topology
from services.haproxy import HAProxyServer
from services.process import free_port, port_in_use
from services.templates import render
from tests.support import REPO

# The preferred base port; another is chosen when a port of its plan is taken (the HA tests'
# clusters start on random base ports).
BASE_PORT = 29432
SHARDS, GROUPS, NODES = 2, 1, 2
ANSIBLE = REPO / "ansible"
BIN = REPO / ".venv" / "bin"
RECAP = re.compile(
    r"^(?P<host>\S+)\s*:\s*ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+"
    r"unreachable=(?P<unreachable>\d+)\s+failed=(?P<failed>\d+)",
    re.MULTILINE,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.playbooks,
    pytest.mark.skipif(
        not (BIN / "ansible-playbook").exists(), reason="ansible-core is not installed"
    ),
    pytest.mark.skipif(
        os.geteuid() != 0,
        reason="the localhost inventory hands server directories to the postgres user",
    ),
]


def plan_ports(topology: HaTopology) -> list[int]:
    ports = [topology.metadata.port, topology.etcd.client_port, topology.etcd.peer_port]
    ports += [topology.stats_port]
    ports += [p for node in topology.nodes for p in (node.port, node.rest_port)]
    ports += [p for shard in topology.shards for p in (shard.write_port, shard.read_port)]
    return ports


def free_topology() -> HaTopology:
    """The HA port plan from BASE_PORT, or from another base whose every port is free."""
    candidates = [BASE_PORT] + [random.randrange(20000, 32000 - 500) for _ in range(100)]
    for base in candidates:
        topology = build_ha_topology(SHARDS, GROUPS, NODES, base)
        if not any(port_in_use("127.0.0.1", port) for port in plan_ports(topology)):
            return topology
    raise RuntimeError("no base port with a free HA port plan")


@dataclass
class Deployment:
    topology: HaTopology
    root: Path
    work: Path
    router_port: int
    # The collector's UDP NetFlow, UDP/TCP IPFIX and metrics ports.
    collector_ports: tuple[int, int, int]
    first_run: subprocess.CompletedProcess[str] | None = None

    def extra_vars(self) -> str:
        return json.dumps(
            {
                "shardlog_base_port": self.topology.metadata.port,
                "shardlog_data_root": str(self.root),
                "shardlog_router_port": self.router_port,
                "collector_netflow_port": self.collector_ports[0],
                "collector_ipfix_port": self.collector_ports[1],
                "collector_metrics_port": self.collector_ports[2],
                # The passwords the playbooks generate on the controller: the test's own.
                "shardlog_secrets_dir": str(self.secrets),
                # Tests value speed over durability.
                "shardlog_postgresql_parameters": {"fsync": "off", "shared_buffers": "64MB"},
                "shardlog_tls": True,
            }
        )

    @property
    def secrets(self) -> Path:
        return self.work / "secrets"

    @property
    def tls(self) -> Path:
        """The CA's certificate and this host's, as the playbooks copied them to the host."""
        return self.root / "tls"

    def tls_vars(self) -> dict[str, object]:
        tls = self.tls
        return {
            "ssl": True,
            "ssl_cert_file": str(tls / "server.crt"),
            "ssl_key_file": str(tls / "server.key"),
            "ssl_ca_file": str(tls / "ca.crt"),
            "ssl_required": True,
        }

    def password(self, role: str) -> str:
        return (self.secrets / f"{role}.password").read_text().strip()

    def env(self) -> dict[str, str]:
        clean = {k: v for k, v in os.environ.items() if not k.startswith(("SHARDLOG_", "ANSIBLE_"))}
        return {
            **clean,
            "PATH": f"{BIN}:{clean.get('PATH', '/usr/bin:/bin')}",
            "ANSIBLE_CONFIG": str(ANSIBLE / "ansible.cfg"),
            "ANSIBLE_HOME": str(self.work / "ansible-home"),
            "ANSIBLE_LOCAL_TEMP": str(self.work / "ansible-tmp"),
            "ANSIBLE_NOCOLOR": "1",
        }

    def playbook(self, name: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [
                BIN / "ansible-playbook",
                "-i",
                ANSIBLE / "inventories" / "localhost.yml",
                ANSIBLE / name,
                "-e",
                self.extra_vars(),
            ],
            env=self.env(),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        with (self.work / f"{name}.log").open("a") as log:
            log.write(result.stdout + result.stderr)
        return result

    def services_run(self, *args: str) -> dict[str, object]:
        result = subprocess.run(
            [BIN / "python", "-m", "services.run", *args, "--root", str(self.root)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        outcome: dict[str, object] = json.loads(result.stdout)
        return outcome


def recap(result: subprocess.CompletedProcess[str]) -> dict[str, int]:
    found = [m.groupdict() for m in RECAP.finditer(result.stdout)]
    assert len(found) == 1, f"no single PLAY RECAP line:\n{result.stdout[-3000:]}"
    return {k: int(v) for k, v in found[0].items() if k != "host"}


def failure(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n{result.stdout[-6000:]}\n{result.stderr[-2000:]}"


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    work = tmp_path_factory.mktemp("ansible")
    deployed = Deployment(
        free_topology(),
        root=work / "root",
        work=work,
        router_port=free_port(),
        collector_ports=(free_port(), free_port(), free_port()),
    )
    try:
        deployed.first_run = deployed.playbook("site.yml")
        yield deployed
    finally:
        stop = deployed.playbook("stop.yml", timeout=180)
        # Whatever stop.yml missed (or a failed run left) is stopped here, by its pid files.
        leftovers = deployed.services_run("stop-all")["services"]
        assert stop.returncode == 0, failure(stop)
        assert isinstance(leftovers, dict)
        assert all(state == "not running" for state in leftovers.values()), leftovers


def test_site_brings_the_cluster_up(deployment: Deployment) -> None:
    first = deployment.first_run
    assert first is not None
    assert first.returncode == 0, failure(first)
    assert recap(first)["failed"] == 0
    assert recap(first)["changed"] > 0


def test_a_second_run_changes_nothing(deployment: Deployment) -> None:
    second = deployment.playbook("site.yml")
    assert second.returncode == 0, failure(second)
    assert recap(second)["changed"] == 0, failure(second)


def test_verify_passes_and_changes_nothing(deployment: Deployment) -> None:
    verify = deployment.playbook("verify.yml")
    assert verify.returncode == 0, failure(verify)
    assert recap(verify)["changed"] == 0, failure(verify)


def test_ansible_renders_the_shared_templates_like_the_launcher(deployment: Deployment) -> None:
    """The localhost inventory follows services/ha_topology's port plan, and Ansible renders
    services/templates/ into the same files the launcher (`shardlog up --ha`) writes."""
    root, topology = deployment.root, deployment.topology
    haproxy = HAProxyServer(topology, root, None).render_config()
    assert (root / "haproxy" / "haproxy.cfg").read_text().rstrip() == haproxy.rstrip()

    etcd = topology.etcd
    assert (root / "etcd" / etcd.name / "etcd.conf.yml").read_text() == render(
        "etcd.conf.yml.j2",
        member_name=etcd.name,
        data_dir=str(root / "etcd" / etcd.name / "data"),
        host=etcd.host,
        client_port=etcd.client_port,
        peer_port=etcd.peer_port,
    )
    for node in topology.nodes:
        home = root / "patroni" / node.name
        assert (home / "patroni.yml").read_text() == render(
            "patroni.yml.j2",
            scope=node.shard,
            node_name=node.name,
            host=node.host,
            port=node.port,
            rest_port=node.rest_port,
            etcd_hosts=f"{etcd.host}:{etcd.client_port}",
            data_dir=str(home / "data"),
            bin_dir="/usr/lib/postgresql/15/bin",
            home=str(home),
            custom_conf=str(home / "postgresql.base.conf"),
            superuser="shardlog",
            superuser_password=deployment.password("shardlog"),
            replication_password=deployment.password("replicator"),
            **deployment.tls_vars(),
        )
        assert (home / "postgresql.base.conf").read_text() == render(
            "postgresql.conf.j2",
            port=node.port,
            listen_addresses=node.host,
            fsync="off",
            shared_buffers="64MB",
            **deployment.tls_vars(),
        )


def test_the_catalog_holds_the_launchers_dsns(deployment: Deployment) -> None:
    result = subprocess.run(
        [BIN / "shardlog", "shards", "list", "--json"],
        env={
            **deployment.env(),
            "SHARDLOG_METADATA__DSN": deployment.topology.metadata.dsn(),
            "SHARDLOG_POOLS__PASSFILE": str(deployment.root / "router" / "pgpass"),
            "SHARDLOG_POOLS__TLS_MODE": "verify-full",
            "SHARDLOG_POOLS__TLS_CA_FILE": str(deployment.tls / "ca.crt"),
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    shards = {s["name"]: (s["group"], s["dsn"], s["state"]) for s in json.loads(result.stdout)}
    assert shards == {s.name: (s.group, s.dsn(), "active") for s in deployment.topology.shards}


def test_nobody_is_trusted_and_passwords_stay_private(deployment: Deployment) -> None:
    root = deployment.root
    rules = [
        line.split()
        for line in (root / "postgres" / "metadata" / "data" / "pg_hba.conf")
        .read_text()
        .splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for node in deployment.topology.nodes:
        patroni = yaml.safe_load((root / "patroni" / node.name / "patroni.yml").read_text())
        rules += [rule.split() for rule in patroni["postgresql"]["pg_hba"]]
        assert stat.S_IMODE((root / "patroni" / node.name / "patroni.yml").stat().st_mode) == 0o600
    assert rules and {rule[-1] for rule in rules} == {"scram-sha-256"}, rules
    # TCP only over TLS (shardlog_tls): hostssl lines, no plain host lines.
    assert {rule[0] for rule in rules} == {"local", "hostssl"}, rules
    for private in (root / "router" / "pgpass", root / "secrets" / "pgpass", deployment.secrets):
        assert stat.S_IMODE(private.stat().st_mode) in (0o600, 0o700), private
    assert len(list(deployment.secrets.glob("*.password"))) == 6
    for key in (deployment.secrets / "tls" / "ca.key", deployment.tls / "server.key"):
        assert stat.S_IMODE(key.stat().st_mode) == 0o600, key


def test_tls_everywhere_verified_by_the_ca(deployment: Deployment) -> None:
    """The router answers HTTPS that the CA verifies; replication, the router's pools and the
    catalog run over TLS; a plain connection is refused."""
    ca = ssl.create_default_context(cafile=str(deployment.tls / "ca.crt"))
    ready = httpx.get(f"https://127.0.0.1:{deployment.router_port}/health/ready", verify=ca)
    assert ready.status_code == 200, ready.text
    env = {**deployment.env(), "PGPASSFILE": str(deployment.root / "secrets" / "pgpass")}

    def psql(port: int, sql: str, sslmode: str = "verify-full") -> subprocess.CompletedProcess[str]:
        dsn = (
            f"host=127.0.0.1 port={port} dbname=shardlog user=shardlog sslmode={sslmode} "
            f"sslrootcert={deployment.tls / 'ca.crt'}"
        )
        return subprocess.run(
            ["psql", "-X", "-At", "-d", dsn, "-c", sql],
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    encrypted = "SELECT bool_and(ssl) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) WHERE "
    metadata = psql(
        deployment.topology.metadata.port, encrypted + "backend_type = 'client backend'"
    )
    assert metadata.stdout.strip() == "t", metadata.stderr
    replicated = [
        psql(node.port, encrypted + "backend_type = 'walsender'").stdout.strip()
        for node in deployment.topology.nodes
    ]
    assert "t" in replicated and "f" not in replicated, replicated
    refused = psql(deployment.topology.metadata.port, "SELECT 1", sslmode="disable")
    assert refused.returncode == 2 and "no encryption" in refused.stderr


def test_the_router_logs_in_to_the_catalog_as_the_catalog_role(deployment: Deployment) -> None:
    result = subprocess.run(
        [
            "psql",
            "-X",
            "-qAt",
            "-d",
            deployment.topology.metadata.dsn(),
            "-c",
            "SELECT DISTINCT usename FROM pg_stat_activity "
            "WHERE application_name IN ('shardlog', 'shardlog-catalog-listener')",
        ],
        env={**deployment.env(), "PGPASSFILE": str(deployment.root / "router" / "pgpass")},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.split() == ["shardlog_catalog"], result.stdout


def test_the_collector_runs_on_the_routers_release(deployment: Deployment) -> None:
    """Started by services.run with its own settings file; /health answers on its metrics
    port, and it reads the router's password file."""
    metrics_port = deployment.collector_ports[2]
    health = httpx.get(f"http://127.0.0.1:{metrics_port}/health", timeout=5)
    assert health.status_code == 200, health.text
    settings = (deployment.root / "collector" / "collector.env").read_text()
    assert f"SHARDLOG_COLLECTOR__NETFLOW_PORT={deployment.collector_ports[0]}" in settings
    assert f"SHARDLOG_POOLS__PASSFILE={deployment.root / 'router' / 'pgpass'}" in settings
    log = (deployment.root / "collector" / "collector.log").read_text()
    assert "Traceback" not in log, log[-3000:]
