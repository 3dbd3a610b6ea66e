"""ansible/ on real hosts (`make test-ansible-hosts`): the three hosts of
ansible/inventories/three-hosts/hosts.yml, made as Debian 12 containers booting systemd
(services/hosts.py), reached by Ansible over SSH. site.yml brings the cluster up as systemd units
with the packages installed from the Debian mirror, verify.yml passes, a second site.yml changes
nothing; rows go in and are found through the router, and so do flows sent to the collector;
every shard node has the segment codec and a closed day compacts and is searched as before;
under keyed ingest, the host of a shard's
primary is powered off, boots again and rejoins, then the host of a primary is cut off at once,
and each time every acknowledged row is stored exactly once; stop.yml stops every unit on the
hosts left. The hosts are removed afterwards, also on failure; their journals and the
playbooks' output stay in var/test-ansible-hosts/."""

from __future__ import annotations

import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.load import KeyedLoad, window
from router.errors import BUG_MARKER
from services.docker_engine import engine_running
from services.hosts import THREE_HOSTS, HostSet, host_image, read_inventory
from services.image import WHEELHOUSE, build_wheelhouse
from tests.compaction_probe import (
    CODEC_SQL,
    assert_a_closed_day_compacts_unchanged,
    assert_codec_created,
)
from tests.flowtruth.platform import eventually_stored, probe_message, probe_tuples
from tests.support import REPO, assert_round_trip

pytestmark = pytest.mark.containers

ANSIBLE = REPO / "ansible"
BIN = Path(sys.executable).parent
ROUTER_HOST, ROUTER_PORT = "host1", 8080
CA_FILE = REPO / "var" / "ansible-secrets" / "tls" / "ca.crt"
# What runs where in the three-hosts inventory.
UNITS = {
    "host1": [
        "shardlog-metadata",
        "shardlog-etcd",
        "haproxy",
        "shardlog-router",
        "shardlog-collector",
    ],
    "host2": ["shardlog-etcd", "shardlog-patroni@shard01-a", "shardlog-patroni@shard02-b"],
    "host3": ["shardlog-etcd", "shardlog-patroni@shard01-b", "shardlog-patroni@shard02-a"],
}
# Patroni's REST API of each node, as the inventory places it.
NODES = {
    "shard01": [("shard01-a", "10.213.7.12:8008"), ("shard01-b", "10.213.7.13:8009")],
    "shard02": [("shard02-a", "10.213.7.13:8008"), ("shard02-b", "10.213.7.12:8009")],
}
HOST_OF = {"10.213.7.12": "host2", "10.213.7.13": "host3"}
# The collector on host1, where the inventory puts it (the role's default ports).
COLLECTOR = "10.213.7.11"
COLLECTOR_NETFLOW_PORT, COLLECTOR_METRICS_PORT = 2055, 9740
SEND = """
import socket, sys
with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
    sock.sendto(bytes.fromhex(sys.argv[1]), (sys.argv[2], int(sys.argv[3])))
"""
RECAP = re.compile(
    r"^(?P<host>\S+)\s*:\s*ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+"
    r"unreachable=(?P<unreachable>\d+)\s+failed=(?P<failed>\d+)",
    re.MULTILINE,
)
STATUS = """
import sys, urllib.request
try:
    print(urllib.request.urlopen(sys.argv[1], timeout=3).read().decode())
except Exception:
    print("null")
"""


@dataclass
class Site:
    hosts: HostSet
    work: Path
    first_run: subprocess.CompletedProcess[str] | None = None
    powered_off: str | None = None
    _auth: dict[str, str] = field(default_factory=dict)

    @property
    def router(self) -> str:
        """The router's HTTPS (the inventory turns shardlog_tls on), on its published port."""
        return self.hosts.url(ROUTER_HOST, ROUTER_PORT, "https")

    @property
    def verify(self) -> ssl.SSLContext:
        """The CA the playbooks made on the controller (shardlog_secrets_dir's default)."""
        return ssl.create_default_context(cafile=str(CA_FILE))

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

    def playbook(
        self, name: str, *args: str, timeout: float = 900
    ) -> subprocess.CompletedProcess[str]:
        """As docs/deployment.md says to run it, from ansible/."""
        result = subprocess.run(
            [
                BIN / "ansible-playbook",
                "-i",
                THREE_HOSTS.relative_to(ANSIBLE),
                "-i",
                self.hosts.connection_inventory,
                name,
                *args,
            ],
            env=self.env(),
            cwd=ANSIBLE,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        with (self.work / f"{name}.log").open("a") as log:
            log.write(result.stdout + result.stderr)
        return result

    def auth(self) -> dict[str, str]:
        """An every-scope API token, made once by the CLI on the router host with the router's
        own settings (operators with catalog access are admins); its Authorization header."""
        if not self._auth:
            made = self.router_cli(
                "tokens",
                "create",
                "--tenant",
                "system",
                "--name",
                "hosts-test",
                "--scopes",
                "admin,audit:write,audit:read,flows:write,flows:read",
            )
            self._auth["Authorization"] = f"Bearer {made.strip().splitlines()[-1]}"
        return self._auth

    def router_cli(self, *args: str) -> str:
        """The shardlog command on the router host with the router's settings; its output."""
        return self.hosts.exec(
            ROUTER_HOST,
            "sh",
            "-c",
            "set -a; . /etc/shardlog/router.env; "
            'exec /opt/shardlog/current/.venv/bin/shardlog "$@"',
            "shardlog",
            *args,
        ).stdout

    def node_sql(self, address: str, database: str, sql: str) -> str:
        """``sql`` run by the superuser on the PostgreSQL node whose Patroni API is at
        ``address``, from the router host over verified TLS; its output."""
        host = address.split(":")[0]
        port = 5432 if address.endswith(":8008") else 5433
        return self.hosts.exec(
            ROUTER_HOST,
            "env",
            "PGPASSFILE=/etc/shardlog/pgpass",
            "psql",
            "-XAt",
            f"host={host} port={port} dbname={database} user=shardlog sslmode=verify-full "
            "sslrootcert=/var/lib/shardlog/tls/ca.crt",
            "-c",
            sql,
        ).stdout.strip()

    def patroni(self, address: str) -> dict[str, Any] | None:
        """A node's /patroni, asked from the router host (None when it does not answer)."""
        shown = self.hosts.exec(
            ROUTER_HOST, "python3", "-c", STATUS, f"http://{address}/patroni"
        ).stdout
        status: dict[str, Any] | None = json.loads(shown)
        return status

    def wait_for_failover(self, shard: str, old: tuple[str, str]) -> tuple[str, str]:
        deadline = time.monotonic() + 120
        while (survivor := self.primary(shard)) is None or survivor == old:
            assert time.monotonic() < deadline, f"{shard}: no failover from {old[0]}"
            time.sleep(1)
        return survivor

    def primary(self, shard: str) -> tuple[str, str] | None:
        leaders = []
        for name, address in NODES[shard]:
            status = self.patroni(address)
            if status and status["role"] in ("master", "primary") and status["state"] == "running":
                leaders.append((name, address))
        return leaders[0] if len(leaders) == 1 else None


def recap(result: subprocess.CompletedProcess[str]) -> dict[str, dict[str, int]]:
    found = {
        m["host"]: {k: int(v) for k, v in m.groupdict().items() if k != "host"}
        for m in RECAP.finditer(result.stdout)
    }
    assert found, f"no PLAY RECAP:\n{result.stdout[-3000:]}"
    return found


def failure(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n{result.stdout[-8000:]}\n{result.stderr[-2000:]}"


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    # Not under pytest's temporary root, which other pytest runs prune: the logs outlive them.
    work = REPO / "var" / "test-ansible-hosts"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    if not any(WHEELHOUSE.glob("*.whl")):
        build_wheelhouse()
    with engine_running(REPO / "var" / "docker") as engine:
        hosts = HostSet(engine, read_inventory(THREE_HOSTS), work / "hosts")
        hosts.start(host_image(engine))
        deployed = Site(hosts, work)
        try:
            deployed.first_run = deployed.playbook("site.yml")
            yield deployed
        finally:
            hosts.save_journals(work / "journals")
            hosts.remove()
            print(f"playbook output and the hosts' journals: {work}")


def test_site_brings_the_hosts_up_as_systemd_units(site: Site) -> None:
    first = site.first_run
    assert first is not None
    assert first.returncode == 0, failure(first)
    assert all(r["failed"] == 0 and r["changed"] > 0 for r in recap(first).values()), failure(first)
    for host, units in UNITS.items():
        for query in ("is-active", "is-enabled"):
            states = site.hosts.exec(host, "systemctl", query, *units, check=False).stdout.split()
            assert states == ["active" if query == "is-active" else "enabled"] * len(units), (
                f"{host} {query} {units}: {states}"
            )
        # Debian's own units, started by the packages, would hold ports and data of ours.
        distro = site.hosts.exec(host, "systemctl", "is-enabled", "postgresql", "etcd", check=False)
        assert "enabled" not in distro.stdout.split(), f"{host}: {distro.stdout}"
    owners = site.hosts.exec("host1", "ps", "-o", "user=", "-C", "shardlog,postgres,etcd").stdout
    assert set(owners.split()) == {"shardlog", "postgres"}, owners


def test_each_shard_was_bootstrapped_by_its_first_node(site: Site) -> None:
    """Nodes on different hosts start at the same time; the inventory's first node of a shard
    is its primary, on timeline 1 (no failover during the bring-up)."""
    for shard, nodes in NODES.items():
        first = site.patroni(nodes[0][1])
        assert first is not None, f"{shard}: {nodes[0][0]} does not answer"
        assert (first["role"], first["timeline"]) in {("master", 1), ("primary", 1)}, (shard, first)


def test_postgresql_takes_tls_connections_only(site: Site) -> None:
    """Plain TCP is refused by pg_hba on every instance; replicas stream over TLS."""
    for host, port in (("host1", 5432), ("host2", 5432), ("host2", 5433)):
        plain = site.hosts.exec(
            ROUTER_HOST,
            "psql",
            f"host={'10.213.7.11' if host == 'host1' else '10.213.7.12'} port={port} "
            "dbname=postgres user=shardlog sslmode=disable",
            "-c",
            "SELECT 1",
            check=False,
        )
        assert plain.returncode == 2 and "no encryption" in plain.stderr, (host, port, plain)
    for _, address in [n for nodes in NODES.values() for n in nodes]:
        status = site.patroni(address)
        assert status is not None
        if status["role"] in ("master", "primary"):
            streams = site.node_sql(
                address,
                "postgres",
                "SELECT bool_and(ssl) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) "
                "WHERE backend_type = 'walsender'",
            )
            assert streams == "t", (address, streams)


def test_verify_passes_and_changes_nothing(site: Site) -> None:
    verify = site.playbook("verify.yml")
    assert verify.returncode == 0, failure(verify)
    assert all(r["changed"] == 0 for r in recap(verify).values()), failure(verify)


def test_a_second_run_changes_nothing(site: Site) -> None:
    second = site.playbook("site.yml")
    assert second.returncode == 0, failure(second)
    assert all(r["changed"] == 0 for r in recap(second).values()), failure(second)


def test_the_services_log_no_tracebacks(site: Site) -> None:
    for host in ("host2", "host3"):
        journal = site.hosts.exec(
            host, "journalctl", "--no-pager", "-u", "shardlog-patroni@*"
        ).stdout
        assert "Traceback" not in journal, f"{host}:\n{journal[-4000:]}"
    for unit in ("shardlog-router", "shardlog-collector"):
        journal = site.hosts.exec("host1", "journalctl", "--no-pager", "-u", unit).stdout
        assert "Traceback" not in journal and BUG_MARKER not in journal, journal[-4000:]


def test_the_router_runs_with_the_native_extension(site: Site) -> None:
    """Installed from the wheelhouse with the 'native' extra: no warning at start."""
    imported = site.hosts.exec(
        ROUTER_HOST,
        "/opt/shardlog/current/.venv/bin/python",
        "-c",
        "import router.native; print(router.native.AVAILABLE)",
    )
    assert imported.stdout.strip().splitlines()[-1] == "True"
    journal = site.hosts.exec(ROUTER_HOST, "journalctl", "--no-pager", "-u", "shardlog-router")
    assert "native ingest extension" not in journal.stdout


def test_audit_and_flows_go_in_and_are_found(site: Site) -> None:
    with httpx.Client(
        base_url=site.router, timeout=60, headers=site.auth(), verify=site.verify
    ) as client:
        assert_round_trip(client, "h")


def test_flows_sent_to_the_collector_are_found(site: Site) -> None:
    """An IPFIX message sent from host1 to the collector's address lands on the switch named
    after its sender; /health answers on the metrics port."""
    health = site.hosts.exec(
        ROUTER_HOST, "python3", "-c", STATUS, f"http://{COLLECTOR}:{COLLECTOR_METRICS_PORT}/health"
    )
    assert json.loads(health.stdout) == {"status": "ok"}, health.stdout
    message = probe_message(network=78, count=4, domain=18)
    site.hosts.exec(
        ROUTER_HOST, "python3", "-c", SEND, message.hex(), COLLECTOR, str(COLLECTOR_NETFLOW_PORT)
    )
    with httpx.Client(
        base_url=site.router, timeout=60, headers=site.auth(), verify=site.verify
    ) as client:
        span = window()
        switch = f"exporter-{COLLECTOR}"
        assert eventually_stored(
            client, switch, span["from"], span["to"], probe_tuples(78, 4), timeout=30
        )


def test_every_shard_node_has_the_segment_codec(site: Site) -> None:
    """The patroni role copied native/pg_segments' build to each host; migration 0010 created
    the extension on each shard (a replica shows its primary's catalog and its own files)."""
    answers = {
        name: site.node_sql(address, "shardlog", CODEC_SQL)
        for nodes in NODES.values()
        for name, address in nodes
    }
    assert_codec_created(answers)


def test_a_closed_day_compacts_and_is_searched_as_before(site: Site) -> None:
    with httpx.Client(
        base_url=site.router, timeout=60, headers=site.auth(), verify=site.verify
    ) as client:
        assert_a_closed_day_compacts_unchanged(
            client,
            lambda owner: site.router_cli("compact", "--json", "--owner", owner, "--clear-now"),
        )


def test_powering_off_a_primarys_host_loses_and_doubles_nothing(site: Site) -> None:
    victim = site.primary("shard01")
    assert victim is not None, "shard01 has no single primary"
    victim_host = HOST_OF[victim[1].split(":")[0]]
    with KeyedLoad(site.router, headers=site.auth(), verify=site.verify) as load:
        load.wait_for(2_000, timeout=60)
        site.hosts.stop_host(victim_host)
        survivor = site.wait_for_failover("shard01", victim)
        # Rows go on being acknowledged afterwards, on both shards (the other one lost its
        # replica with the host).
        load.wait_for(len(load.acknowledged) + 4_000, timeout=180)
    load.assert_stored_exactly_once()
    site.powered_off = victim_host
    print(
        f"{victim_host} powered off: {victim[0]} -> {survivor[0]}; "
        f"{len(load.acknowledged)} rows acknowledged, {load.errors} failed attempts retried"
    )


def test_the_host_boots_again_and_its_nodes_rejoin(site: Site) -> None:
    """Its units are enabled: the host comes back as it was, each of its nodes a replica of the
    new primary (verify.yml: one primary per shard, every replica streaming)."""
    assert site.powered_off is not None, "no host was powered off"
    site.hosts.start_host(site.powered_off)
    verify = site.playbook("verify.yml")
    assert verify.returncode == 0, failure(verify)
    states = site.hosts.exec(
        site.powered_off, "systemctl", "is-active", *UNITS[site.powered_off], check=False
    )
    assert set(states.stdout.split()) == {"active"}, states.stdout


def test_cutting_a_primarys_host_off_loses_and_doubles_nothing(site: Site) -> None:
    """A host lost at once (`docker kill`: no unit stopped, its address silent): Patroni fails
    over when the leader key expires, the router finds the new primary through the multi-host
    DSN, and synchronous replication keeps every acknowledged row."""
    victim = site.primary("shard01")
    assert victim is not None, "shard01 has no single primary"
    victim_host = HOST_OF[victim[1].split(":")[0]]
    # Patroni promotes only a synchronous standby: each shard's other node must be one.
    deadline = time.monotonic() + 120
    for shard, nodes in NODES.items():
        others = [address for _, address in nodes if HOST_OF[address.split(":")[0]] != victim_host]
        while not all((site.patroni(a) or {}).get("sync_standby") for a in others):
            assert time.monotonic() < deadline, f"{shard}: no synchronous standby off {victim_host}"
            time.sleep(1)
    with KeyedLoad(site.router, headers=site.auth(), verify=site.verify) as load:
        load.wait_for(2_000, timeout=60)
        site.hosts.kill_host(victim_host)
        survivor = site.wait_for_failover("shard01", victim)
        load.wait_for(len(load.acknowledged) + 4_000, timeout=180)
    load.assert_stored_exactly_once()
    router = site.hosts.exec("host1", "journalctl", "--no-pager", "-u", "shardlog-router").stdout
    assert BUG_MARKER not in router, router[-4000:]
    print(
        f"{victim_host} cut off: {victim[0]} -> {survivor[0]}; "
        f"{len(load.acknowledged)} rows acknowledged, {load.errors} failed attempts retried"
    )


def test_stop_stops_every_unit_on_the_hosts_left(site: Site) -> None:
    left = [host for host in UNITS if site.hosts.running(host)]
    stop = site.playbook("stop.yml", "--limit", ",".join(left))
    assert stop.returncode == 0, failure(stop)
    for host in left:
        states = site.hosts.exec(host, "systemctl", "is-active", *UNITS[host], check=False)
        assert set(states.stdout.split()) == {"inactive"}, f"{host}: {states.stdout}"
