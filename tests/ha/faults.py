"""The faults of the HA fault tests and of bench/failover, each run while a load writes: the
fault is made, checked to have taken effect, then healed; each returns its recovery time in
seconds. Shared so the benchmark measures exactly what the tests assert on."""

from __future__ import annotations

import time

from services.ha_cluster import HaCluster
from services.patroni import PatroniNode
from tests.ha.ingest_load import IngestLoad, wait_until, writable

ETCD_OUTAGE_S = 25.0  # beyond Patroni's ttl (20 s)
OUTAGE_S = 10.0  # longest a whole shard stays stopped


def haproxy_answers(cluster: HaCluster, shard: str, read: bool) -> bool:
    spec = cluster.shard(shard)
    dsn = spec.haproxy_dsn(cluster.topology.host, read=read)
    # The write port reaches the primary (not in recovery); the read port a replica.
    return writable(dsn) is (not read)


def haproxy_stopped(cluster: HaCluster, load: IngestLoad) -> float:
    """HAProxy stops while ingest goes on (the router uses multi-host DSNs, not HAProxy);
    recovery: the write port answers again after HAProxy is started."""
    shard = cluster.topology.shards[0].name
    cluster.haproxy.stop()
    assert not haproxy_answers(cluster, shard, read=False), "HAProxy still answers"
    load.wait_for_batches(len(load.outcomes) + 6)
    cluster.haproxy.start()
    return wait_until(lambda: haproxy_answers(cluster, shard, read=False), 30, "HAProxy")


def etcd_stopped(cluster: HaCluster, load: IngestLoad) -> float:
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


def whole_shard_stopped(cluster: HaCluster, shard: str, load: IngestLoad) -> float:
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
