"""A local high-availability cluster: the metadata instance, one etcd, every shard as
Patroni-managed nodes (the first bootstraps, the others clone it and stream), and HAProxy."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from router.cluster_defaults import DATABASE, DEFAULT_BIN_DIR, SUPERUSER
from services import process
from services.credentials import CATALOG_ROLE, REPLICATION_USER, ROUTER_ROLES, SecretStore
from services.daemon import StartOutcome
from services.etcd import EtcdServer
from services.ha_topology import HaShardSpec, HaTopology
from services.haproxy import HAProxyServer
from services.patroni import PatroniNode
from services.postgres import PostgresInstance
from services.process import OsUser, ServiceError

T = TypeVar("T")


class HaCluster:
    def __init__(
        self,
        topology: HaTopology,
        root: Path,
        user: OsUser | None,
        bin_dir: Path = DEFAULT_BIN_DIR,
        settings: dict[str, Any] | None = None,
    ) -> None:
        self.topology = topology
        self.root = root.absolute()
        self.user = user
        self.bin_dir = bin_dir
        self.secrets = SecretStore(self.root / "secrets")
        self.metadata = PostgresInstance(
            topology.metadata,
            self.root / "postgres",
            user,
            bin_dir,
            dict(settings or {}),
            self.secrets,
        )
        self.etcd = EtcdServer(topology.etcd, self.root / "etcd", user)
        self.nodes = {
            node.name: PatroniNode(
                node,
                self.root / "patroni",
                user,
                f"{topology.etcd.host}:{topology.etcd.client_port}",
                bin_dir,
                settings,
                self.secrets,
            )
            for node in topology.nodes
        }
        self.haproxy = HAProxyServer(topology, self.root, user)

    def shard(self, name: str) -> HaShardSpec:
        return next(s for s in self.topology.shards if s.name == name)

    def nodes_of(self, shard: str) -> list[PatroniNode]:
        return [self.nodes[node.name] for node in self.shard(shard).nodes]

    def primary(self, shard: str) -> PatroniNode | None:
        return next((n for n in self.nodes_of(shard) if n.is_primary()), None)

    def wait_primary(self, shard: str, timeout: float) -> PatroniNode:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.primary(shard)
            if found is not None:
                return found
            time.sleep(0.2)
        raise ServiceError(f"{shard}: no primary within {timeout:.0f}s")

    def wait_replicating(self, shard: str, timeout: float) -> None:
        """Every other node streams from the primary and one is the synchronous standby:
        before that, losing the primary leaves no replica Patroni may promote."""
        others = {node.spec.name for node in self.nodes_of(shard)}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            primary = self.primary(shard)
            info = primary.info() if primary is not None else None
            if primary is not None and info is not None:
                streams = {
                    r.get("application_name"): r
                    for r in info.get("replication", [])
                    if r.get("state") == "streaming"
                }
                wanted = others - {primary.spec.name}
                if wanted <= set(streams) and (
                    not wanted or any(r.get("sync_state") == "sync" for r in streams.values())
                ):
                    return
            time.sleep(0.2)
        raise ServiceError(f"{shard}: replicas not streaming within {timeout:.0f}s")

    def _start_shard(self, spec: HaShardSpec, timeout: float) -> dict[str, StartOutcome]:
        nodes = self.nodes_of(spec.name)
        if any((node.data_dir / "PG_VERSION").exists() for node in nodes):
            # An existing shard: its last primary may be any node (after a failover), and only
            # that node or its synchronous standby may lead again, so all start together.
            started = self._parallel(nodes, lambda node: node.start(timeout))
            outcomes = {
                node.spec.name: outcome for node, outcome in zip(nodes, started, strict=True)
            }
            self.wait_primary(spec.name, timeout)
        else:
            # A new shard: the first node bootstraps it, the others clone the primary.
            outcomes = {nodes[0].spec.name: nodes[0].start(timeout)}
            self._ensure_database(self.wait_primary(spec.name, timeout))
            for node in nodes[1:]:
                outcomes[node.spec.name] = node.start(timeout)
        self.wait_replicating(spec.name, timeout)
        return outcomes

    def _ensure_database(self, primary: PatroniNode) -> None:
        def psql(sql: str) -> str:
            return process.run_as(
                [
                    self.bin_dir / "psql",
                    "-X",
                    "-qAt",
                    "-v",
                    "ON_ERROR_STOP=1",
                    "-h",
                    primary.spec.host,
                    "-p",
                    str(primary.spec.port),
                    "-U",
                    SUPERUSER,
                    "-d",
                    "postgres",
                    "-c",
                    sql,
                ],
                None,
                env={"PGPASSFILE": str(self.secrets.passfile)},
            ).stdout.strip()

        if psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'") != "1":
            psql(f"CREATE DATABASE {DATABASE}")

    def _parallel(self, items: list[T], action: Callable[[T], Any]) -> list[Any]:
        with ThreadPoolExecutor(max_workers=max(1, len(items))) as pool:
            return list(pool.map(action, items))

    def start(self, timeout: float = 120.0) -> dict[str, StartOutcome]:
        # Before anything starts in parallel: every password exists once.
        self.secrets.ensure((SUPERUSER, CATALOG_ROLE, *ROUTER_ROLES, REPLICATION_USER))
        outcomes: dict[str, StartOutcome] = {}
        outcomes["metadata"] = self.metadata.start(timeout)
        outcomes["etcd1"] = self.etcd.start(timeout)
        for result in self._parallel(
            list(self.topology.shards), lambda spec: self._start_shard(spec, timeout)
        ):
            outcomes.update(result)
        outcomes["haproxy"] = self.haproxy.start(timeout)
        return outcomes

    def stop(self, timeout: float = 30.0) -> dict[str, bool]:
        stopped = {"haproxy": self.haproxy.stop(timeout)}

        # Replicas first, so a stopping primary does not fail over to a node about to stop.
        def stop_shard(spec: HaShardSpec) -> dict[str, bool]:
            nodes = self.nodes_of(spec.name)
            nodes.sort(key=lambda n: n.is_primary())
            return {n.spec.name: n.stop(timeout) for n in nodes}

        for result in self._parallel(list(self.topology.shards), stop_shard):
            stopped.update(result)
        stopped["etcd1"] = self.etcd.stop(timeout)
        stopped["metadata"] = self.metadata.stop(timeout)
        return stopped

    def status(self) -> list[dict[str, Any]]:
        rows = [self.metadata.status(), self.etcd.status()]
        rows += [node.status() for node in self.nodes.values()]
        rows.append(self.haproxy.status())
        return rows
