"""The shape of a local high-availability cluster: one metadata instance, one etcd, one
HAProxy, and N shards in G groups, each shard a Patroni-managed primary with replicas.

Ports, from the base port B: metadata B; PostgreSQL nodes B+1...; Patroni REST APIs B+100...;
etcd client B+200 and peer B+201; HAProxy stats B+299, write ports B+300+i, read ports B+400+i.
"""

from __future__ import annotations

from dataclasses import dataclass

from router.cluster_defaults import DATABASE, DEFAULT_BASE_PORT, SUPERUSER
from services.postgres import InstanceSpec
from services.topology import group_name

DEFAULT_HA_SHARDS = 4
DEFAULT_HA_GROUPS = 2
DEFAULT_NODES = 2
_REST_OFFSET = 100
_ETCD_OFFSET = 200
_WRITE_OFFSET = 300
_READ_OFFSET = 400
MAX_SHARDS = 99


@dataclass(frozen=True)
class NodeSpec:
    name: str  # shard01-a
    shard: str
    host: str
    port: int
    rest_port: int

    @property
    def rest_url(self) -> str:
        return f"http://{self.host}:{self.rest_port}"


@dataclass(frozen=True)
class HaShardSpec:
    name: str
    group: str
    nodes: tuple[NodeSpec, ...]
    write_port: int
    read_port: int

    def dsn(self, database: str = DATABASE) -> str:
        """Multi-host: libpq and asyncpg try the nodes in turn and keep the writable one."""
        hosts = ",".join(f"{node.host}:{node.port}" for node in self.nodes)
        return f"postgresql://{SUPERUSER}@{hosts}/{database}?target_session_attrs=read-write"

    def haproxy_dsn(self, host: str, database: str = DATABASE, read: bool = False) -> str:
        port = self.read_port if read else self.write_port
        return f"postgresql://{SUPERUSER}@{host}:{port}/{database}"


@dataclass(frozen=True)
class EtcdSpec:
    name: str
    host: str
    client_port: int
    peer_port: int

    @property
    def client_url(self) -> str:
        return f"http://{self.host}:{self.client_port}"


@dataclass(frozen=True)
class HaTopology:
    metadata: InstanceSpec
    shards: tuple[HaShardSpec, ...]
    etcd: EtcdSpec
    host: str
    stats_port: int

    @property
    def groups(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(shard.group for shard in self.shards))

    @property
    def nodes(self) -> tuple[NodeSpec, ...]:
        return tuple(node for shard in self.shards for node in shard.nodes)


def build_ha_topology(
    shards: int = DEFAULT_HA_SHARDS,
    groups: int = DEFAULT_HA_GROUPS,
    nodes: int = DEFAULT_NODES,
    base_port: int = DEFAULT_BASE_PORT,
    host: str = "127.0.0.1",
) -> HaTopology:
    if groups < 1 or shards < groups:
        raise ValueError(f"need at least one shard per group (shards={shards}, groups={groups})")
    if not 1 <= nodes <= 9:
        raise ValueError(f"nodes per shard must be 1 to 9, not {nodes}")
    if shards > MAX_SHARDS or shards * nodes >= _REST_OFFSET:
        raise ValueError(f"{shards} shards x {nodes} nodes do not fit the port plan")
    if not 1024 <= base_port <= 65535 - _READ_OFFSET - shards:
        raise ValueError(f"base port {base_port} leaves no room for the HA port plan")
    specs = []
    for index in range(shards):
        name = f"shard{index + 1:02d}"
        members = tuple(
            NodeSpec(
                name=f"{name}-{chr(ord('a') + n)}",
                shard=name,
                host=host,
                port=base_port + 1 + index * nodes + n,
                rest_port=base_port + _REST_OFFSET + index * nodes + n,
            )
            for n in range(nodes)
        )
        specs.append(
            HaShardSpec(
                name=name,
                group=group_name(index * groups // shards),
                nodes=members,
                write_port=base_port + _WRITE_OFFSET + index,
                read_port=base_port + _READ_OFFSET + index,
            )
        )
    return HaTopology(
        metadata=InstanceSpec(name="metadata", port=base_port, role="metadata", host=host),
        shards=tuple(specs),
        etcd=EtcdSpec("etcd1", host, base_port + _ETCD_OFFSET, base_port + _ETCD_OFFSET + 1),
        host=host,
        stats_port=base_port + _WRITE_OFFSET - 1,
    )
