"""docker-compose.yml (no Docker engine here): it parses, runs every service from the project's
image (which installs the Debian packages the Ansible roles install), publishes the port plan of
services/ha_topology.py from its base port, and renders the same services/templates/ files as
the Ansible roles; docker/entrypoint.py renders each service's files without a missing variable."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from services.ha_topology import HaTopology, build_ha_topology
from services.templates import TEMPLATE_DIR
from tests.support import REPO

COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
ENV: dict[str, str] = SERVICES["metadata"]["environment"]
IMAGE = "shardlog/shardlog:dev"
TEMPLATE_MOUNT = "./services/templates:/opt/shardlog/services/templates:ro"
ROLES = REPO / "ansible" / "roles"
# The compose service's command -> the Ansible role that runs the same service.
ROLE_OF = {"metadata": "postgres", "etcd": "etcd", "patroni": "patroni", "haproxy": "haproxy"}


def topology() -> HaTopology:
    return build_ha_topology(
        int(ENV["SHARDLOG_COMPOSE_SHARDS"]),
        int(ENV["SHARDLOG_COMPOSE_GROUPS"]),
        int(ENV["SHARDLOG_COMPOSE_NODES"]),
        int(ENV["SHARDLOG_COMPOSE_BASE_PORT"]),
    )


def published(service: str, protocol: str = "tcp") -> set[int]:
    ports = set()
    for mapping in SERVICES[service].get("ports", []):
        address, host_port, container_port = mapping.split(":")
        container_port, _, kind = container_port.partition("/")
        assert address == "127.0.0.1", f"{service} publishes {mapping} beyond loopback"
        assert host_port == container_port, f"{service}: {mapping}"
        if (kind or "tcp") == protocol:
            ports.add(int(container_port))
    return ports


def kind(service: str) -> str:
    return str(SERVICES[service]["command"][0])


def rendered_templates(service: str) -> set[str]:
    items = SERVICES[service]["environment"].get("SHARDLOG_RENDER", "").split()
    return {item.split(":", 1)[0] for item in items}


def role_templates(role: str) -> set[str]:
    """The services/templates files a role's tasks render."""
    shared = {path.name for path in TEMPLATE_DIR.glob("*.j2")}
    text = "\n".join(p.read_text() for p in (ROLES / role / "tasks").glob("*.yml"))
    return set(re.findall(r"[\w.]+\.j2", text)) & shared


def test_every_service_runs_the_project_image() -> None:
    for name, service in SERVICES.items():
        assert service["image"] == IMAGE, name
        assert service["build"] == {
            "context": ".",
            "dockerfile": "docker/Dockerfile",
            "args": {"BASE_IMAGE": "${SHARDLOG_BASE_IMAGE:-debian:bookworm-slim}"},
        }, name
    assert (REPO / "docker" / "Dockerfile").exists()


def test_the_image_installs_the_packages_of_the_ansible_roles() -> None:
    # Every stage counts: the build stage installs what builds the Python environment
    # (python3-venv), the image what runs.
    dockerfile = (REPO / "docker" / "Dockerfile").read_text()
    installed = {
        package
        for command in dockerfile.split("apt-get install")[1:]
        for package in re.findall(r"[\w.+-]+", command.split("&&")[0])
    }
    for defaults in ROLES.glob("*/defaults/main.yml"):
        for key, value in (yaml.safe_load(defaults.read_text()) or {}).items():
            if key.endswith("_packages") and isinstance(value, list):
                assert set(value) <= installed, f"{defaults}: {key} not all in the Dockerfile"


def test_services_follow_the_ha_port_plan() -> None:
    plan = topology()
    nodes = {name for name in SERVICES if kind(name) == "patroni"}
    assert nodes == {node.name for node in plan.nodes}
    assert published("metadata") == {plan.metadata.port}
    assert published("etcd1") == {plan.etcd.client_port}
    for node in plan.nodes:
        assert SERVICES[node.name]["command"] == ["patroni", node.name]
        assert published(node.name) == {node.port, node.rest_port}
    assert published("haproxy") == {plan.stats_port} | {
        port for shard in plan.shards for port in (shard.write_port, shard.read_port)
    }
    assert published("router") == {int(ENV["SHARDLOG_COMPOSE_ROUTER_PORT"])}
    collector = SERVICES["collector"]["environment"]
    netflow, ipfix = (int(collector[f"SHARDLOG_COLLECTOR__{p}_PORT"]) for p in ("NETFLOW", "IPFIX"))
    assert published("collector", "udp") == {netflow, ipfix}
    assert published("collector") == {ipfix, int(collector["SHARDLOG_COLLECTOR__METRICS_PORT"])}
    assert ENV["SHARDLOG_METADATA__DSN"].endswith(f"@metadata:{plan.metadata.port}/shardlog")


def test_the_first_node_of_a_shard_bootstraps_it() -> None:
    for shard in topology().shards:
        first, *others = shard.nodes
        assert "etcd1" in SERVICES[first.name]["depends_on"]
        for node in others:
            assert first.name in SERVICES[node.name]["depends_on"]


def test_services_render_the_templates_the_ansible_roles_render() -> None:
    seen: set[str] = set()
    for name, service in SERVICES.items():
        templates = rendered_templates(name)
        if kind(name) in ROLE_OF:
            assert templates == role_templates(ROLE_OF[kind(name)]), name
            assert TEMPLATE_MOUNT in service["volumes"], name
        else:
            assert not templates, name
        seen |= templates
    assert seen == {path.name for path in TEMPLATE_DIR.glob("*.j2")}


def load_entrypoint() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "compose_entrypoint", REPO / "docker" / "entrypoint.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("service", [s for s in SERVICES if kind(s) in ROLE_OF])
def test_the_entrypoint_renders_each_service(
    service: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entrypoint = load_entrypoint()
    environment = dict(SERVICES[service]["environment"])
    environment["SHARDLOG_RENDER"] = environment.get("SHARDLOG_RENDER", "").replace(
        "/var/lib/shardlog", str(tmp_path)
    )
    for key, value in environment.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(entrypoint, "HOME", tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "PG_VERSION").write_text("15\n")  # no initdb
    started: list[list[str]] = []
    monkeypatch.setattr(entrypoint, "run_foreground", started.append)

    assert entrypoint.main(SERVICES[service]["command"]) == 0

    program = {
        "metadata": "postgres",
        "etcd": "etcd",
        "patroni": "patroni",
        "haproxy": "haproxy",
    }[kind(service)]
    assert len(started) == 1 and program in " ".join(started[0])
    for template in rendered_templates(service):
        destination = next(
            item.split(":", 1)[1]
            for item in environment["SHARDLOG_RENDER"].split()
            if item.startswith(template + ":")
        )
        text = Path(destination).read_text()
        assert text.strip(), destination
        if template == "haproxy.cfg.j2":
            for node in topology().nodes:
                assert (
                    f"server {node.name} {node.name}:{node.port} check port {node.rest_port}"
                    in text
                )
        if template == "patroni.yml.j2":
            assert f"hosts: 'etcd1:{topology().etcd.client_port}'" in text


def test_the_entrypoint_runs_the_collector_on_every_interface(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entrypoint = load_entrypoint()
    for key, value in SERVICES["collector"]["environment"].items():
        monkeypatch.setenv(key, value)
    started: list[list[str]] = []
    monkeypatch.setattr(entrypoint, "run_foreground", started.append)
    assert entrypoint.main(SERVICES["collector"]["command"]) == 0
    assert started == [["/opt/shardlog/.venv/bin/shardlog", "collector"]]
    assert SERVICES["collector"]["environment"]["SHARDLOG_COLLECTOR__HOST"] == "0.0.0.0"
    assert SERVICES["collector"]["depends_on"] == SERVICES["router"]["depends_on"]
