"""Faults under continuous audit ingest through the router, against a real Patroni + etcd +
HAProxy cluster: every acknowledged row is stored exactly once, and audit ingest sees no
client error while its group has a healthy shard. Recovery times are measured and printed."""

from __future__ import annotations

import time

import httpx

from services.ha_cluster import HaCluster
from services.router_process import RouterProcess
from tests.ha.conftest import record_recovery
from tests.ha.ingest_load import FlowLoad, IngestLoad, wait_until, writable


def haproxy_answers(cluster: HaCluster, shard: str, read: bool) -> bool:
    spec = cluster.shard(shard)
    dsn = spec.haproxy_dsn(cluster.topology.host, read=read)
    # The write port reaches the primary (not in recovery); the read port a replica.
    return writable(dsn) is (not read)


def batches(api: httpx.Client, shard: str, outcome: str) -> float:
    """shardlog_ingest_batches_total on one shard with one outcome, audit and flows: a failed
    flow batch marks the shard unhealthy, and new audit batches then avoid it altogether."""
    wanted = {f'outcome="{outcome}"', f'shard="{shard}"'}
    total = 0.0
    for line in api.get("/metrics").text.splitlines():
        if line.startswith("shardlog_ingest_batches_total{"):
            labels = set(line[line.index("{") + 1 : line.index("}")].split(","))
            if wanted <= labels:
                total += float(line.rsplit(" ", 1)[1])
    return total


def assert_clean(load: IngestLoad, api: httpx.Client) -> None:
    assert not load.errors, [(o.status, o.error) for o in load.errors[:3]]
    assert load.check_stored(api) >= len(load.acknowledged())


def test_ha_cluster_serves_through_router_and_haproxy(
    ha_api: httpx.Client, ha_cluster: HaCluster, ha_router: RouterProcess
) -> None:
    ready = ha_api.get("/health/ready")
    assert ready.status_code == 200, ready.text
    for shard in ha_api.get("/v1/admin/shards").json():
        assert "target_session_attrs=read-write" in shard["dsn"]
        assert shard["dsn"].count(",") == 1  # both nodes
    for spec in ha_cluster.topology.shards:
        assert haproxy_answers(ha_cluster, spec.name, read=False)
        wait_until(lambda s=spec.name: haproxy_answers(ha_cluster, s, read=True), 30, "read port")
    with IngestLoad(str(ha_api.base_url)) as load:
        load.wait_for_batches(6)
    assert_clean(load, ha_api)


def test_haproxy_stopped(ha_api: httpx.Client, ha_cluster: HaCluster) -> None:
    """The router reaches the shards by multi-host DSN, not through HAProxy: ingest goes on;
    HAProxy's ports come back when it is started again."""
    shard = ha_cluster.topology.shards[0].name
    with IngestLoad(str(ha_api.base_url)) as load:
        load.wait_for_batches(4)
        ha_cluster.haproxy.stop()
        assert not haproxy_answers(ha_cluster, shard, read=False)
        during = len(load.outcomes)
        load.wait_for_batches(during + 6)
        ha_cluster.haproxy.start()
        recovered = wait_until(
            lambda: haproxy_answers(ha_cluster, shard, read=False), 30, "HAProxy write port"
        )
        record_recovery("HAProxy stopped (write port back after start)", recovered)
        load.wait_for_batches(len(load.outcomes) + 2)
    assert_clean(load, ha_api)


def test_etcd_stopped(ha_api: httpx.Client, ha_cluster: HaCluster) -> None:
    """Beyond Patroni's ttl without etcd the primaries stay primaries (failsafe mode: every
    member is reachable), so ingest never stops."""
    with IngestLoad(str(ha_api.base_url)) as load:
        load.wait_for_batches(4)
        ha_cluster.etcd.stop()
        stopped_at = time.monotonic()
        time.sleep(25)  # > ttl 20 s
        for spec in ha_cluster.topology.shards:
            assert writable(spec.dsn()), f"{spec.name} lost its primary without etcd"
        during = [o for o in load.outcomes if o.status == 200]
        assert len(during) > 4
        ha_cluster.etcd.start()
        recovered = wait_until(
            lambda: all(ha_cluster.primary(s.name) for s in ha_cluster.topology.shards),
            60,
            "leaders in etcd again",
        )
        record_recovery("etcd stopped 25 s (leaders back after start)", recovered)
        assert time.monotonic() - stopped_at > 25
        load.wait_for_batches(len(load.outcomes) + 2)
    assert_clean(load, ha_api)


def test_whole_shard_stopped(ha_api: httpx.Client, ha_cluster: HaCluster) -> None:
    """Both nodes of one shard stop: audit rows go to the group's other shard meanwhile;
    after the shard is back, nothing is missing and nothing doubled."""
    spec = ha_cluster.topology.shards[1]
    nodes = ha_cluster.nodes_of(spec.name)
    with IngestLoad(str(ha_api.base_url)) as load:
        load.wait_for_batches(4)
        primary = ha_cluster.primary(spec.name)
        assert primary is not None
        for node in sorted(nodes, key=lambda n: n is primary):
            node.stop()
        assert not writable(spec.dsn())
        # A batch whose COMMIT the stop cut off is in doubt: it waits (up to the failover
        # wait) for this shard to come back, so the outage stays short.
        during = len(load.outcomes)
        load.wait_for_batches(during + 4)
        started = time.monotonic()
        for node in sorted(nodes, key=lambda n: n is not primary):
            node.start()
        wait_until(lambda: writable(spec.dsn()), 90, f"{spec.name} primary")
        elapsed = time.monotonic() - started
        record_recovery("whole shard stopped (primary back after start)", elapsed)
        ha_cluster.wait_replicating(spec.name, 60)
        load.wait_for_batches(len(load.outcomes) + 4)
    assert_clean(load, ha_api)


def test_primary_killed(ha_api: httpx.Client, ha_cluster: HaCluster) -> None:
    """kill -9 of a shard's primary (Patroni, postmaster and backends): the replica is
    promoted once the leader key expires; audit batches caught mid-way are retried by the
    router on the group's other shard or, when in doubt, on the new primary; flow batches
    (placed by hash) wait for the new primary. Nothing is lost, nothing merged twice."""
    spec = ha_cluster.topology.shards[0]
    flows = FlowLoad(str(ha_api.base_url))
    with IngestLoad(str(ha_api.base_url)) as load, flows:
        load.wait_for_batches(4)
        victim = ha_cluster.primary(spec.name)
        assert victim is not None
        killed_at = time.monotonic()
        victim.kill()
        wait_until(
            lambda: (p := ha_cluster.primary(spec.name)) is not None and p is not victim,
            90,
            "a promoted replica",
        )
        wait_until(lambda: writable(spec.dsn()), 30, "writes to the new primary")
        record_recovery("kill -9 primary (new primary writable)", time.monotonic() - killed_at)
        load.wait_for_batches(len(load.outcomes) + 4)
    failed = batches(ha_api, spec.name, "failed")
    assert failed > 0, "the fault never met a batch: the test proved nothing"
    victim.start()
    wait_until(victim.healthy, 90, "the old primary rejoining as a replica")
    info = victim.info() or {}
    assert info.get("role") == "replica", info
    ha_cluster.wait_replicating(spec.name, 60)
    assert_clean(load, ha_api)
    flows.check_stored(ha_api)
