"""The shape of a local cluster: one metadata instance and N shard instances in G groups."""

from __future__ import annotations

from dataclasses import dataclass

from router.cluster_defaults import DEFAULT_BASE_PORT, DEFAULT_GROUPS, DEFAULT_SHARDS
from services.postgres import InstanceSpec


@dataclass(frozen=True)
class Topology:
    metadata: InstanceSpec
    shards: tuple[InstanceSpec, ...]

    @property
    def instances(self) -> tuple[InstanceSpec, ...]:
        return (self.metadata, *self.shards)

    @property
    def groups(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(spec.group for spec in self.shards if spec.group))


def group_name(index: int) -> str:
    return f"group{index + 1}"


def build_topology(
    shards: int = DEFAULT_SHARDS,
    groups: int = DEFAULT_GROUPS,
    base_port: int = DEFAULT_BASE_PORT,
    host: str = "127.0.0.1",
) -> Topology:
    """Metadata on ``base_port``, shards on the ports after it, split into contiguous groups
    as even as possible (12 in 2 groups: shard01-06 in group1, shard07-12 in group2)."""
    if groups < 1 or shards < groups:
        raise ValueError(f"need at least one shard per group (shards={shards}, groups={groups})")
    if not 1024 <= base_port <= 65535 - shards:
        raise ValueError(f"base port {base_port} leaves no room for {shards} shards")
    width = len(str(shards)) if shards >= 10 else 2
    specs = []
    for index in range(shards):
        group_index = index * groups // shards
        specs.append(
            InstanceSpec(
                name=f"shard{index + 1:0{width}d}",
                port=base_port + 1 + index,
                role="shard",
                group=group_name(group_index),
                host=host,
            )
        )
    metadata = InstanceSpec(name="metadata", port=base_port, role="metadata", host=host)
    return Topology(metadata=metadata, shards=tuple(specs))
