"""docker-compose.yml run as a user runs it (`make test-compose`): a Docker engine (ours under
var/docker when none runs), the image built offline (local base image, wheelhouse), `up`, ready,
rows in and found, IPFIX sent to the collector's published port found through the router, the
segment codec on every shard node and a closed day compacted and searched as before, a shard's
primary killed under continuous keyed ingest with every acknowledged row stored exactly
once, then `down -v`."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import yaml

from bench.load import KeyedLoad, window
from router.cluster_defaults import DATABASE, SUPERUSER
from services.docker_engine import DockerEngine, engine_running
from services.image import base_image, build_image
from services.process import port_in_use
from tests.compaction_probe import (
    CODEC_SQL,
    assert_a_closed_day_compacts_unchanged,
    assert_codec_created,
)
from tests.flowtruth.platform import eventually_stored, probe_message, probe_tuples
from tests.support import REPO, assert_round_trip

pytestmark = pytest.mark.containers

PROJECT = "shardlog-test"
ROUTER = "http://127.0.0.1:8080"
COLLECTOR_UDP = ("127.0.0.1", 2055)
COLLECTOR_METRICS = "http://127.0.0.1:9740"
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
READY_TIMEOUT_S = 240
# The token the compose fixture makes, sent with every /v1 request.
AUTH: dict[str, str] = {}


def published_ports() -> list[int]:
    ports = []
    for service in COMPOSE["services"].values():
        for mapping in service.get("ports", []):
            ports.append(int(mapping.split(":")[1]))
    return ports


@dataclass
class Compose:
    engine: DockerEngine
    env: dict[str, str]

    def run(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["docker-compose", "-p", PROJECT, "-f", str(REPO / "docker-compose.yml"), *args],
            env=self.env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert result.returncode == 0, f"docker-compose {args}: {result.stdout}{result.stderr}"
        return result

    def container(self, service: str) -> str:
        return f"{PROJECT}_{service}_1"

    def logs(self) -> str:
        return self.run("logs", "--no-color", "--tail", "40").stdout

    def token(self) -> str:
        """A token of every scope, made by the CLI in the router's container (operators with
        catalog access are admins); printed once on standard output."""
        made = self.run(
            "exec",
            "-T",
            "router",
            "/opt/shardlog/.venv/bin/shardlog",
            "tokens",
            "create",
            "--tenant",
            "system",
            "--name",
            "compose test",
            "--scopes",
            "admin,audit:write,audit:read,flows:write,flows:read",
        )
        return made.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def compose() -> Iterator[Compose]:
    taken = [p for p in published_ports() if port_in_use("127.0.0.1", p)]
    if taken:
        pytest.fail(f"ports {taken} are taken (make down, or stop what uses them) before the test")
    with engine_running(REPO / "var" / "docker") as engine:
        build_image(engine)
        env = {**engine.env(), "SHARDLOG_BASE_IMAGE": base_image(engine)}
        up = Compose(engine, env)
        try:
            up.run("up", "-d", "--no-build")
            deadline = time.monotonic() + READY_TIMEOUT_S
            while not _ready():
                assert time.monotonic() < deadline, f"not ready in time:\n{up.logs()}"
                time.sleep(1)
            AUTH["Authorization"] = f"Bearer {up.token()}"
            yield up
        finally:
            up.run("down", "-v", "--remove-orphans")


def _ready() -> bool:
    try:
        return httpx.get(f"{ROUTER}/health/ready", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def test_every_published_port_is_loopback_only() -> None:
    for service in COMPOSE["services"].values():
        for mapping in service.get("ports", []):
            assert mapping.startswith("127.0.0.1:"), mapping


def test_audit_and_flows_go_in_and_are_found(compose: Compose) -> None:
    with httpx.Client(base_url=ROUTER, timeout=60, headers=AUTH) as client:
        assert_round_trip(client, "c")


def test_the_router_runs_with_the_native_extension(compose: Compose) -> None:
    """The wheelhouse carries the native wheel and the image installs the 'native' extra."""
    imported = compose.run(
        "exec",
        "-T",
        "router",
        "/opt/shardlog/.venv/bin/python",
        "-c",
        "import router.native; print(router.native.AVAILABLE)",
    )
    assert imported.stdout.strip().splitlines()[-1] == "True"
    assert "native ingest extension" not in compose.run("logs", "--no-color", "router").stdout


def test_the_console_is_served_from_the_installed_package(compose: Compose) -> None:
    """The image installs the router from a wheel: the console's files must be in it."""
    with httpx.Client(base_url=ROUTER, timeout=30, headers=AUTH) as client:
        page = client.get("/ui/")
        assert page.status_code == 200 and "shardlog console" in page.text
        assert client.get("/ui/js/main.js").status_code == 200
        assert client.get("/v1/whoami").json()["tenant"]


def test_ipfix_to_the_collector_is_found_through_the_router(compose: Compose) -> None:
    """A few flows in one IPFIX message to the published UDP port. Docker's proxy or NAT is the
    sender the collector sees; its metrics name it, and its flows are on exporter-<address>."""
    message, wanted = probe_message(network=77, count=4, domain=18), probe_tuples(77, 4)
    deadline = time.monotonic() + 60
    exporter = None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        while exporter is None:
            assert time.monotonic() < deadline, f"the collector got nothing:\n{compose.logs()}"
            sock.sendto(message, COLLECTOR_UDP)  # again until it counts one: UDP may be lost
            time.sleep(1)
            try:
                metrics = httpx.get(f"{COLLECTOR_METRICS}/metrics", timeout=5).text
            except httpx.HTTPError:
                continue
            found = re.search(r'messages_total\{exporter="([^"]+)",version="10"\}', metrics)
            exporter = found.group(1) if found else None
    assert httpx.get(f"{COLLECTOR_METRICS}/health", timeout=5).status_code == 200
    with httpx.Client(base_url=ROUTER, timeout=60, headers=AUTH) as client:
        span = window()
        switch = f"exporter-{exporter}"
        assert eventually_stored(client, switch, span["from"], span["to"], wanted, timeout=30)
    print(f"the collector saw the sender as {exporter}")


def test_every_shard_node_has_the_segment_codec(compose: Compose) -> None:
    """The image carries native/pg_segments' build: migration 0010 created the extension on
    every shard, and every node (a replica promoted later too) has its files."""
    answers = {}
    for name, service in COMPOSE["services"].items():
        if not name.startswith("shard"):
            continue
        port = service["ports"][0].split(":")[-1]
        dsn = f"postgresql://{SUPERUSER}@{name}:{port}/{DATABASE}"
        shown = compose.run("exec", "-T", "router", "psql", "-XAt", "-d", dsn, "-c", CODEC_SQL)
        answers[name] = shown.stdout.strip()
    assert_codec_created(answers)


def test_a_closed_day_compacts_and_is_searched_as_before(compose: Compose) -> None:
    def compact(owner: str) -> str:
        return compose.run(
            "exec",
            "-T",
            "router",
            "/opt/shardlog/.venv/bin/shardlog",
            "compact",
            "--json",
            "--owner",
            owner,
            "--clear-now",
        ).stdout

    with httpx.Client(base_url=ROUTER, timeout=60, headers=AUTH) as client:
        assert_a_closed_day_compacts_unchanged(client, compact)


def _primary_of(shard: int) -> str:
    """The compose service of shard ``shard``'s current primary, from Patroni's REST API."""
    env = COMPOSE["x-shardlog-environment"]
    base, nodes = int(env["SHARDLOG_COMPOSE_BASE_PORT"]), int(env["SHARDLOG_COMPOSE_NODES"])
    for node in range(nodes):
        rest = base + 100 + (shard - 1) * nodes + node
        try:
            if httpx.get(f"http://127.0.0.1:{rest}/primary", timeout=3).status_code == 200:
                return f"shard{shard:02d}-{'abcdefghi'[node]}"
        except httpx.HTTPError:
            continue
    raise AssertionError(f"shard{shard:02d} has no primary")


def test_killing_a_primary_loses_and_doubles_nothing(compose: Compose) -> None:
    victim = _primary_of(1)
    with KeyedLoad(ROUTER, headers=AUTH) as load:
        load.wait_for(2_000, timeout=60)
        subprocess.run(
            ["docker", "kill", compose.container(victim)],
            env=compose.env,
            check=True,
            capture_output=True,
            timeout=60,
        )
        before = len(load.acknowledged)
        # Until the shard has a new primary, and rows went on being acknowledged after it.
        deadline = time.monotonic() + 120
        while True:
            try:
                survivor = _primary_of(1)
            except AssertionError:
                survivor = None
            if survivor is not None and survivor != victim:
                break
            assert time.monotonic() < deadline, f"no failover:\n{compose.logs()}"
            time.sleep(1)
        load.wait_for(before + 4_000, timeout=120)
    try:
        load.assert_stored_exactly_once()
    except AssertionError as failure:
        # A 500 names a reference in the router's log, which goes with the containers.
        log = compose.run("logs", "--no-color", "--tail", "200", "router").stdout
        raise AssertionError(f"{failure}\nthe router's log:\n{log}") from failure
    print(f"{len(load.acknowledged)} rows acknowledged, {load.errors} failed attempts retried")


def test_compose_file_builds_offline() -> None:
    """The build section names the base image by a variable (a local one where none can be
    pulled) and the Dockerfile installs Python packages only from the wheelhouse."""
    build = COMPOSE["x-shardlog-service"]["build"]
    assert build["args"]["BASE_IMAGE"].startswith("${SHARDLOG_BASE_IMAGE:-")
    dockerfile = (REPO / "docker" / "Dockerfile").read_text()
    assert "--no-index --find-links /wheels" in dockerfile
    assert "/usr/sbin" in dockerfile.split("ENV PATH=")[1].splitlines()[0]
    assert os.path.exists(REPO / ".dockerignore")
