"""A local cluster: every PostgreSQL instance of a topology under one data directory."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from router.cluster_defaults import DEFAULT_BIN_DIR, SUPERUSER
from services.credentials import CATALOG_ROLE, ROUTER_ROLES, SecretStore
from services.postgres import PostgresInstance, StartOutcome
from services.process import OsUser
from services.topology import Topology

T = TypeVar("T")
# initdb and start-up are mostly I/O and fork/exec; a few at a time is faster even on 2 cores.
_PARALLEL = 4


class LocalCluster:
    def __init__(
        self,
        topology: Topology,
        root: Path,
        user: OsUser | None,
        bin_dir: Path = DEFAULT_BIN_DIR,
        settings: dict[str, Any] | None = None,
    ) -> None:
        self.topology = topology
        self.root = root.absolute()
        self.user = user
        self.secrets = SecretStore(self.root / "secrets")
        self.instances = {
            spec.name: PostgresInstance(
                spec, self.root / "postgres", user, bin_dir, dict(settings or {}), self.secrets
            )
            for spec in topology.instances
        }

    @property
    def metadata(self) -> PostgresInstance:
        return self.instances[self.topology.metadata.name]

    @property
    def shards(self) -> list[PostgresInstance]:
        return [self.instances[spec.name] for spec in self.topology.shards]

    def _each(self, action: Callable[[PostgresInstance], T]) -> dict[str, T]:
        with ThreadPoolExecutor(max_workers=_PARALLEL) as pool:
            futures = {name: pool.submit(action, inst) for name, inst in self.instances.items()}
            return {name: future.result() for name, future in futures.items()}

    def start(self, timeout: float = 60.0) -> dict[str, StartOutcome]:
        (self.root / "postgres").mkdir(parents=True, exist_ok=True)
        # Before the instances start in parallel: every password exists once.
        self.secrets.ensure((SUPERUSER, CATALOG_ROLE, *ROUTER_ROLES))
        return self._each(lambda instance: instance.start(timeout))

    def stop(self, timeout: float = 30.0) -> dict[str, bool]:
        return self._each(lambda instance: instance.stop(timeout))

    def status(self) -> list[dict[str, Any]]:
        return [instance.status() for instance in self.instances.values()]
