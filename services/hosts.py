"""Debian 12 hosts with systemd, as containers, for running the Ansible playbooks the way real
hosts run them (`make test-ansible-hosts`).

The hosts are the ones an inventory names: each container is one inventory host, with the
hostname of its inventory name and the IP address of its ``shardlog_address`` on a Docker
network of its own whose subnet is the inventory's first ``shardlog_allowed_networks`` entry.
Ansible reaches a host through its sshd published on a free 127.0.0.1 port, as ``admin`` with a
key pair made per run; the services reach each other by their addresses on the network, as on a
real site. A router host also publishes its router port on 127.0.0.1.

A host is up when ``systemctl is-system-running`` says running (or degraded) and sshd accepts
the key; ``stop_host`` powers one off (every unit stopped in order); ``remove`` removes every
container and the network, whatever state they are in.

    python -m services.hosts up   [--inventory INV] [--home var/hosts]
    python -m services.hosts down [--home var/hosts]

``up`` writes ``HOME/connection.yml``, the inventory to pass after INV:
``ansible-playbook -i INV -i HOME/connection.yml site.yml``.
"""

from __future__ import annotations

import argparse
import hashlib
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from services.docker_engine import DockerEngine, run
from services.image import base_image, has_image
from services.process import ServiceError

REPO = Path(__file__).resolve().parent.parent
RECIPE = Path(__file__).resolve().parent / "host-image" / "Dockerfile"
THREE_HOSTS = REPO / "ansible" / "inventories" / "three-hosts" / "hosts.yml"
PREFIX = "shardlog-host"
BOOT_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 90
SSH_OPTIONS = (
    "-o",
    "StrictHostKeyChecking=no",
    "-o",
    "UserKnownHostsFile=/dev/null",
    "-o",
    "BatchMode=yes",
    "-o",
    "ConnectTimeout=5",
    "-o",
    "LogLevel=ERROR",
)
# What a host container needs to boot systemd without --privileged.
SYSTEMD_OPTIONS = (
    "--cap-add",
    "SYS_ADMIN",
    "--security-opt",
    "seccomp=unconfined",
    "--volume",
    "/sys/fs/cgroup:/sys/fs/cgroup:rw",
    "--tmpfs",
    "/run",
    "--tmpfs",
    "/run/lock",
)


def host_image(engine: DockerEngine) -> str:
    """The host image, built once per engine and again whenever its recipe or base changes."""
    base = base_image(engine)
    recipe = RECIPE.read_bytes()
    digest = hashlib.sha256(recipe + base.encode()).hexdigest()[:12]
    tag = f"shardlog/host:{digest}"
    if not has_image(engine, tag):
        engine.docker(
            "build", "--tag", tag, "--build-arg", f"BASE_IMAGE={base}", RECIPE.parent, timeout=1800
        )
    return tag


@dataclass(frozen=True)
class HostSpec:
    name: str
    address: str
    # Container ports published on a free 127.0.0.1 port besides sshd's.
    publish: tuple[int, ...] = ()


@dataclass(frozen=True)
class Inventory:
    path: Path
    subnet: str
    hosts: tuple[HostSpec, ...]


def read_inventory(path: Path) -> Inventory:
    """The hosts of an inventory as Ansible reads it (``ansible-inventory --list``)."""
    program = shutil.which("ansible-inventory") or str(
        Path(sys.executable).parent / "ansible-inventory"
    )
    listed = run([program, "-i", path, "--list"], dict(os.environ), timeout=120)
    data = json.loads(listed.stdout)
    hostvars: dict[str, dict[str, object]] = data["_meta"]["hostvars"]
    routers = set(data.get("shardlog_router", {}).get("hosts", []))
    hosts, subnets = [], set()
    for name in sorted(hostvars):
        variables = hostvars[name]
        address = variables.get("shardlog_address")
        networks = variables.get("shardlog_allowed_networks")
        if not isinstance(address, str) or not isinstance(networks, list) or not networks:
            raise ServiceError(
                f"{path}: {name} needs shardlog_address and shardlog_allowed_networks"
            )
        subnets.add(str(networks[0]))
        if ipaddress.ip_address(address) not in ipaddress.ip_network(str(networks[0])):
            raise ServiceError(f"{path}: {name}'s address {address} is outside {networks[0]}")
        port = int(str(variables.get("shardlog_router_port", 8080)))
        hosts.append(HostSpec(name, address, (port,) if name in routers else ()))
    if len(subnets) != 1:
        raise ServiceError(f"{path}: the hosts do not share one network: {sorted(subnets)}")
    return Inventory(path, subnets.pop(), tuple(hosts))


@dataclass
class Host:
    spec: HostSpec
    container: str
    # Container port -> its port on 127.0.0.1 (22 among them).
    ports: dict[int, int] = field(default_factory=dict)

    @property
    def ssh_port(self) -> int:
        return self.ports[22]


class HostSet:
    def __init__(
        self, engine: DockerEngine, inventory: Inventory, home: Path, run_id: str | None = None
    ) -> None:
        self.engine = engine
        self.inventory = inventory
        self.home = home.absolute()
        self.run_id = run_id or uuid.uuid4().hex[:8]
        self.network = f"{PREFIX}-{self.run_id}"
        self.hosts = {
            spec.name: Host(spec, f"{PREFIX}-{self.run_id}-{spec.name}") for spec in inventory.hosts
        }

    @property
    def key(self) -> Path:
        return self.home / "id_ed25519"

    @property
    def connection_inventory(self) -> Path:
        return self.home / "connection.yml"

    def start(self, image: str, timeout: float = BOOT_TIMEOUT_S) -> None:
        """Start every host and wait until each boots and accepts SSH; on failure whatever was
        started is removed again."""
        self.home.mkdir(parents=True, exist_ok=True)
        if not self.key.exists():
            run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", self.network, "-f", self.key],
                dict(os.environ),
            )
        try:
            self._create_network()
            for host in self.hosts.values():
                self._run(host, image)
            deadline = time.monotonic() + timeout
            for host in self.hosts.values():
                self._wait_booted(host, deadline)
            self._write_connection_inventory()
        except BaseException:
            self.remove()
            raise

    def _create_network(self) -> None:
        created = self.engine.docker(
            "network", "create", "--subnet", self.inventory.subnet, self.network, check=False
        )
        if created.returncode != 0:
            raise ServiceError(
                f"cannot create network {self.network} on {self.inventory.subnet} (another run "
                f"of these hosts still up? `docker network ls`): {created.stderr.strip()}"
            )

    def _run(self, host: Host, image: str) -> None:
        publish: list[str] = []
        for port in (22, *host.spec.publish):
            publish += ["--publish", f"127.0.0.1::{port}"]
        self.engine.docker(
            "run",
            "--detach",
            "--name",
            host.container,
            "--hostname",
            host.spec.name,
            "--network",
            self.network,
            "--ip",
            host.spec.address,
            "--label",
            f"shardlog.hosts={self.run_id}",
            *SYSTEMD_OPTIONS,
            *publish,
            image,
        )
        self._read_ports(host)
        self.exec(
            host.spec.name,
            "sh",
            "-c",
            "install -d -m 0700 -o admin -g admin ~admin/.ssh"
            " && cat > ~admin/.ssh/authorized_keys"
            " && chown admin:admin ~admin/.ssh/authorized_keys"
            " && chmod 0600 ~admin/.ssh/authorized_keys",
            input=self.key.with_suffix(".pub").read_text(),
        )

    def _read_ports(self, host: Host) -> None:
        for port in (22, *host.spec.publish):
            shown = self.engine.docker("port", host.container, f"{port}/tcp").stdout
            host.ports[port] = int(shown.splitlines()[0].rsplit(":", 1)[1])

    def _wait_booted(self, host: Host, deadline: float) -> None:
        state = ""
        while time.monotonic() < deadline:
            state = self.exec(
                host.spec.name, "systemctl", "is-system-running", check=False
            ).stdout.strip()
            if (
                state in ("running", "degraded")
                and self.ssh(host.spec.name, "true").returncode == 0
            ):
                return
            time.sleep(0.5)
        failed = self.exec(host.spec.name, "systemctl", "--failed", "--no-pager", check=False)
        raise ServiceError(
            f"{host.container} not up in time (systemd: {state or 'no answer'}):\n{failed.stdout}"
        )

    def _write_connection_inventory(self) -> None:
        """How Ansible reaches each host from here: its published sshd, as admin with the key."""
        lines = [
            "# Written by services/hosts.py: pass after the inventory the hosts were made from.",
            "all:",
            "  vars:",
            "    ansible_user: admin",
            f"    ansible_ssh_private_key_file: {self.key}",
            f"    ansible_ssh_common_args: {' '.join(SSH_OPTIONS[:4])}",
            "  hosts:",
        ]
        for host in self.hosts.values():
            lines.append(
                f"    {host.spec.name}: {{ansible_host: 127.0.0.1, ansible_port: {host.ssh_port}}}"
            )
        self.connection_inventory.write_text("\n".join(lines) + "\n")
        (self.home / "hosts.json").write_text(
            json.dumps(
                {
                    "run_id": self.run_id,
                    "network": self.network,
                    "hosts": {
                        h.spec.name: {"container": h.container, "ports": h.ports}
                        for h in self.hosts.values()
                    },
                },
                indent=2,
            )
        )

    def exec(
        self,
        name: str,
        *argv: str,
        check: bool = True,
        input: str | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        command = ["docker", "exec", *(["--interactive"] if input is not None else [])]
        result = subprocess.run(
            [*command, self.hosts[name].container, *argv],
            env=self.engine.env(),
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise ServiceError(
                f"{name}: {' '.join(argv)} failed ({result.returncode}): {result.stderr}"
            )
        return result

    def ssh(self, name: str, *command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                "ssh",
                "-i",
                str(self.key),
                "-p",
                str(self.hosts[name].ssh_port),
                *SSH_OPTIONS,
                "admin@127.0.0.1",
                *command,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def url(self, name: str, port: int, scheme: str = "http") -> str:
        """``scheme``:// on 127.0.0.1 for a port the host publishes."""
        return f"{scheme}://127.0.0.1:{self.hosts[name].ports[port]}"

    def stop_host(self, name: str) -> None:
        """Power a host off: systemd stops every unit in order, then the container exits."""
        self.engine.docker(
            "stop",
            "--time",
            str(STOP_TIMEOUT_S),
            self.hosts[name].container,
            timeout=STOP_TIMEOUT_S + 30,
        )

    def kill_host(self, name: str) -> None:
        """Cut a host's power: every process gone at once, its address silent."""
        self.engine.docker("kill", self.hosts[name].container)

    def start_host(self, name: str, timeout: float = BOOT_TIMEOUT_S) -> None:
        """Boot a stopped host again (its disk kept) and wait for systemd and sshd; its sshd
        gets a new published port, written to the connection inventory."""
        host = self.hosts[name]
        self.engine.docker("start", host.container)
        self._read_ports(host)
        self._wait_booted(host, time.monotonic() + timeout)
        self._write_connection_inventory()

    def running(self, name: str) -> bool:
        shown = self.engine.docker(
            "inspect", "--format", "{{.State.Running}}", self.hosts[name].container, check=False
        )
        return shown.stdout.strip() == "true"

    def save_journals(self, target: Path) -> None:
        """Each running host's journal, one file per host, for a look after a failure."""
        target.mkdir(parents=True, exist_ok=True)
        for name in self.hosts:
            if self.running(name):
                journal = self.exec(
                    name, "journalctl", "--no-pager", "-o", "short-iso", check=False
                )
                (target / f"{name}.journal").write_text(journal.stdout + journal.stderr)

    def remove(self) -> None:
        for host in self.hosts.values():
            self.engine.docker(
                "rm", "--force", "--volumes", host.container, check=False, timeout=120
            )
        self.engine.docker("network", "rm", self.network, check=False)


@contextmanager
def hosts_running(
    engine: DockerEngine, inventory: Inventory, home: Path, image: str
) -> Iterator[HostSet]:
    """The inventory's hosts for the duration of a block; removed afterwards, even on failure."""
    hosts = HostSet(engine, inventory, home)
    hosts.start(image)
    try:
        yield hosts
    finally:
        hosts.remove()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m services.hosts")
    parser.add_argument("what", choices=["up", "down"])
    parser.add_argument("--inventory", type=Path, default=THREE_HOSTS)
    parser.add_argument("--home", type=Path, default=REPO / "var" / "hosts")
    parser.add_argument("--engine-home", type=Path, default=REPO / "var" / "docker")
    args = parser.parse_args(argv)
    engine = DockerEngine(args.engine_home)
    state_file = args.home / "hosts.json"
    if args.what == "down":
        if not state_file.exists():
            print("no hosts of ours")
            return 0
        state = json.loads(state_file.read_text())
        for host in state["hosts"].values():
            engine.docker("rm", "--force", "--volumes", host["container"], check=False)
        engine.docker("network", "rm", state["network"], check=False)
        state_file.unlink()
        print(f"removed {', '.join(state['hosts'])}")
        return 0
    if state_file.exists():
        print(f"{state_file} exists: `python -m services.hosts down` first", file=sys.stderr)
        return 1
    engine.start()
    hosts = HostSet(engine, read_inventory(args.inventory), args.home)
    hosts.start(host_image(engine))
    for host in hosts.hosts.values():
        print(
            f"{host.spec.name}: {host.spec.address}, ssh on 127.0.0.1:{host.ssh_port}, "
            f"container {host.container}"
        )
    print(f"ansible-playbook -i {args.inventory} -i {hosts.connection_inventory} site.yml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
