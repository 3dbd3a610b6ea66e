"""Faults under continuous audit ingest through the router, against a real Patroni + etcd +
HAProxy cluster: every acknowledged row is stored exactly once, and audit ingest sees no
client error while its group has a healthy shard. Recovery times are measured and printed."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from bench.load import FlowLoad, IngestLoad, auth_of
from services import faults
from services.faults import wait_until
from services.ha_cluster import HaCluster
from services.router_process import RouterProcess
from tests.ha.conftest import record_recovery


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
        assert faults.haproxy_answers(ha_cluster, spec.name, read=False)
        wait_until(
            lambda s=spec.name: faults.haproxy_answers(ha_cluster, s, read=True), 30, "read port"
        )
    with IngestLoad(str(ha_api.base_url), auth_of(ha_api)) as load:
        load.wait_for_batches(6)
    assert_clean(load, ha_api)


def test_haproxy_stopped(ha_api: httpx.Client, ha_cluster: HaCluster) -> None:
    """The router reaches the shards by multi-host DSN, not through HAProxy: ingest goes on;
    HAProxy's ports come back when it is started again."""
    with IngestLoad(str(ha_api.base_url), auth_of(ha_api)) as load:
        load.wait_for_batches(4)
        recovered = faults.haproxy_stopped(ha_cluster, load)
        record_recovery("HAProxy stopped (write port back after start)", recovered)
        load.wait_for_batches(len(load.outcomes) + 2)
    assert_clean(load, ha_api)


def test_etcd_stopped(ha_api: httpx.Client, ha_cluster: HaCluster) -> None:
    """Beyond Patroni's ttl without etcd the primaries stay primaries (failsafe mode: every
    member is reachable), so ingest never stops."""
    with IngestLoad(str(ha_api.base_url), auth_of(ha_api)) as load:
        load.wait_for_batches(4)
        recovered = faults.etcd_stopped(ha_cluster, load)
        record_recovery("etcd stopped 25 s (leaders back after start)", recovered)
        load.wait_for_batches(len(load.outcomes) + 2)
    assert_clean(load, ha_api)


def test_whole_shard_stopped(ha_api: httpx.Client, ha_cluster: HaCluster) -> None:
    """Both nodes of one shard stop: audit rows go to the group's other shard meanwhile;
    after the shard is back, nothing is missing and nothing doubled."""
    shard = ha_cluster.topology.shards[1].name
    with IngestLoad(str(ha_api.base_url), auth_of(ha_api)) as load:
        load.wait_for_batches(4)
        recovered = faults.whole_shard_stopped(ha_cluster, shard, load)
        record_recovery("whole shard stopped (primary back after start)", recovered)
        load.wait_for_batches(len(load.outcomes) + 4)
    assert_clean(load, ha_api)


@contextmanager
def synchronous_group(api: httpx.Client, group: str) -> Iterator[None]:
    """The group's writes of every kind wait for a standby while inside, then the kinds'
    defaults again."""
    path = f"/v1/admin/groups/{group}/replication"
    assert api.put(path, json={"synchronous": True}).status_code == 200
    try:
        yield
    finally:
        assert api.put(path, json={"synchronous": None}).status_code == 200


def test_primary_killed(ha_api: httpx.Client, ha_cluster: HaCluster) -> None:
    """kill -9 of a shard's primary (Patroni, postmaster and backends): the replica is
    promoted once the leader key expires; audit batches caught mid-way are retried by the
    router on the group's other shard or, when in doubt, on the new primary; flow batches
    (placed by hash) wait for the new primary. Nothing is lost, nothing merged twice.

    Flows commit without waiting for the standby by default (docs/operations.md): a kill -9
    may then lose the last flow batches the standby had not received yet. The group waits
    for its standby here, the setting that promises no loss."""
    shard = ha_cluster.topology.shards[0].name
    group = ha_cluster.topology.shards[0].group
    flows = FlowLoad(str(ha_api.base_url), auth_of(ha_api))
    with (
        synchronous_group(ha_api, group),
        IngestLoad(str(ha_api.base_url), auth_of(ha_api)) as load,
        flows,
    ):
        load.wait_for_batches(4)
        victim, recovered = faults.primary_killed(ha_cluster, shard)
        record_recovery("kill -9 primary (new primary writable)", recovered)
        load.wait_for_batches(len(load.outcomes) + 4)
    assert batches(ha_api, shard, "failed") > 0, "the fault never met a batch: proved nothing"
    faults.rejoin(ha_cluster, shard)
    info = victim.info() or {}
    assert info.get("role") == "replica", info
    assert_clean(load, ha_api)
    flows.check_stored(ha_api)


def switchover(cluster: HaCluster, shard: str) -> None:
    """A planned switchover to the shard's other node, through Patroni's REST API (refused
    with 412 until Patroni has recorded the candidate as the synchronous standby)."""
    primary = cluster.primary(shard)
    assert primary is not None
    candidate = next(n for n in cluster.nodes_of(shard) if n is not primary)
    body = {"leader": primary.spec.name, "candidate": candidate.spec.name}
    refused = ""

    def accepted() -> bool:
        nonlocal refused
        request = urllib.request.Request(
            f"{primary.spec.rest_url}/switchover",
            data=json.dumps(body).encode(),
            headers={"content-type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return bool(response.status == 200)
        except urllib.error.HTTPError as exc:
            refused = exc.read().decode(errors="replace")
            return False

    try:
        wait_until(accepted, 60, "the switchover accepted")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {refused}") from None
    wait_until(candidate.is_primary, 60, f"{candidate.spec.name} primary")


def test_cluster_restarts_after_a_failover(ha_api: httpx.Client, ha_cluster: HaCluster) -> None:
    """`shardlog down` then `up` when a shard's primary is no longer its first node: only the
    last primary (or its synchronous standby) may lead, so the nodes start together."""
    shard = ha_cluster.topology.shards[0].name
    first = ha_cluster.nodes_of(shard)[0]
    if first.is_primary():
        switchover(ha_cluster, shard)
    assert not first.is_primary()
    ha_cluster.stop()
    ha_cluster.start()
    for spec in ha_cluster.topology.shards:
        assert ha_cluster.primary(spec.name) is not None, spec.name
    wait_until(lambda: ha_api.get("/health/ready").status_code == 200, 30, "router ready")
    with IngestLoad(str(ha_api.base_url), auth_of(ha_api)) as load:
        load.wait_for_batches(4)
    assert_clean(load, ha_api)
