"""Faults of an HA cluster (services/ha_cluster.py), made while a load writes through the router:
the fault is made, checked to have taken effect, then healed; each returns its recovery time in
seconds. The HA fault tests assert on them and bench/failover measures them, so both see the
same faults."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from services.ha_cluster import HaCluster
from services.patroni import PatroniNode

ETCD_OUTAGE_S = 25.0  # beyond Patroni's ttl (20 s)
OUTAGE_S = 10.0  # longest a whole shard stays stopped


class Load(Protocol):
    """What a fault needs of the load writing meanwhile (bench/load.py's IngestLoad)."""

    @property
    def outcomes(self) -> Sequence[object]: ...

    def acknowledged(self) -> list[str]: ...

    def wait_for_batches(self, count: int, timeout: float = ..., required: bool = ...) -> None: ...


def wait_until(check: Callable[[], object], timeout: float, what: str) -> float:
    """Seconds until ``check()`` is true; an AssertionError past ``timeout``."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():
            return time.monotonic() - started
        time.sleep(0.2)
    raise AssertionError(f"{what} not within {timeout:.0f}s")


def writable(dsn: str) -> bool:
    """A read-write session opens through the multi-host DSN (the shard has a primary)."""
    result = subprocess.run(
        ["psql", "-X", "-qAt", "-d", dsn, "-c", "SELECT pg_is_in_recovery()"],
        capture_output=True,
        text=True,
        timeout=15,
        check=False,
        # The cluster's password file, as the caller's environment names it.
        env={
            "PGCONNECT_TIMEOUT": "2",
            "PATH": "/usr/bin:/bin",
            "PGPASSFILE": os.environ.get("PGPASSFILE", ""),
        },
    )
    return result.returncode == 0 and result.stdout.strip() == "f"


def haproxy_answers(cluster: HaCluster, shard: str, read: bool) -> bool:
    spec = cluster.shard(shard)
    dsn = spec.haproxy_dsn(cluster.topology.host, read=read)
    # The write port reaches the primary (not in recovery); the read port a replica.
    return writable(dsn) is (not read)


def haproxy_stopped(cluster: HaCluster, load: Load) -> float:
    """HAProxy stops while ingest goes on (the router uses multi-host DSNs, not HAProxy);
    recovery: the write port answers again after HAProxy is started."""
    shard = cluster.topology.shards[0].name
    cluster.haproxy.stop()
    assert not haproxy_answers(cluster, shard, read=False), "HAProxy still answers"
    load.wait_for_batches(len(load.outcomes) + 6)
    cluster.haproxy.start()
    return wait_until(lambda: haproxy_answers(cluster, shard, read=False), 30, "HAProxy")


def etcd_stopped(cluster: HaCluster, load: Load) -> float:
    """etcd stops for longer than the ttl: with failsafe mode the primaries stay primaries
    (every member is reachable); recovery: every shard has its leader in etcd again."""
    acknowledged = len(load.acknowledged())
    cluster.etcd.stop()
    time.sleep(ETCD_OUTAGE_S)
    for spec in cluster.topology.shards:
        assert writable(spec.dsn()), f"{spec.name} lost its primary without etcd"
    assert len(load.acknowledged()) > acknowledged, "ingest stopped without etcd"
    cluster.etcd.start()
    return wait_until(
        lambda: all(cluster.primary(s.name) for s in cluster.topology.shards),
        60,
        "leaders in etcd again",
    )


def whole_shard_stopped(cluster: HaCluster, shard: str, load: Load) -> float:
    """Both nodes of one shard stop (primary last, so nothing fails over) while ingest goes
    on; recovery: a writable primary after the nodes are started again."""
    nodes = cluster.nodes_of(shard)
    primary = cluster.primary(shard)
    assert primary is not None, f"{shard} has no primary"
    for node in sorted(nodes, key=lambda n: n is primary):
        node.stop()
    assert not writable(cluster.shard(shard).dsn()), f"{shard} still writable"
    # Rows go to the group's other shard meanwhile. A batch whose COMMIT the stop cut off is
    # in doubt and waits (up to the failover wait) for this shard to come back; when every
    # writer holds one, no batch completes until then, so the outage is bounded here.
    load.wait_for_batches(len(load.outcomes) + 4, timeout=OUTAGE_S, required=False)
    started = time.monotonic()
    for node in sorted(nodes, key=lambda n: n is not primary):
        node.start()
    wait_until(lambda: writable(cluster.shard(shard).dsn()), 90, f"{shard} primary")
    recovered = time.monotonic() - started
    cluster.wait_replicating(shard, 60)
    return recovered


def primary_killed(cluster: HaCluster, shard: str) -> tuple[PatroniNode, float]:
    """kill -9 of the shard's primary (Patroni, postmaster, backends); recovery: the promoted
    replica takes writes. Returns the killed node (down until `rejoin`) and the time."""
    victim = cluster.primary(shard)
    assert victim is not None, f"{shard} has no primary"
    killed_at = time.monotonic()
    victim.kill()
    wait_until(
        lambda: (p := cluster.primary(shard)) is not None and p is not victim,
        90,
        "a promoted replica",
    )
    wait_until(lambda: writable(cluster.shard(shard).dsn()), 30, "writes to the new primary")
    return victim, time.monotonic() - killed_at


def rejoin(cluster: HaCluster, shard: str) -> None:
    """Start every stopped node of the shard and wait until it streams again (the killed
    primary comes back as a replica, rewound if it had diverged)."""
    for node in cluster.nodes_of(shard):
        if not node.healthy():
            node.start()
            wait_until(node.healthy, 90, f"{node.spec.name} rejoining")
    cluster.wait_replicating(shard, 60)
