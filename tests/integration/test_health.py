"""Readiness names a stopped shard with 503 and recovers when it is back."""

from __future__ import annotations

import httpx

from services.cluster import LocalCluster
from tests.support import eventually


def test_live(api: httpx.Client) -> None:
    assert api.get("/health/live").json() == {"status": "live"}


def test_ready_lists_every_shard(api: httpx.Client, cluster: LocalCluster) -> None:
    response = api.get("/health/ready")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "ready"
    reports = {s["name"]: s for s in body["shards"]}
    for instance in cluster.shards:
        report = reports[instance.spec.name]
        assert report["reachable"] is True
        assert report["state"] == "active"
        assert report["group"] == instance.spec.group
    assert body["unreachable"] == []


def test_stopped_shard_is_named_with_503(api: httpx.Client, cluster: LocalCluster) -> None:
    victim = cluster.shards[-1]
    name = victim.spec.name
    victim.stop()
    try:
        response = api.get("/health/ready")
        assert response.status_code == 503
        body = response.json()
        assert body["unreachable"] == [name]
        assert name in body["error"]["message"]
        assert body["error"]["code"] == "unready"
        others = [s for s in body["shards"] if s["name"] != name and s["state"] != "down"]
        assert all(s["reachable"] for s in others)
        metrics = api.get("/metrics").text
        assert f'shardlog_shard_up{{group="{victim.spec.group}",shard="{name}"}} 0.0' in metrics
    finally:
        victim.start()
    eventually(lambda: api.get("/health/ready").status_code == 200, timeout=20)


def test_metrics_are_prometheus_text(api: httpx.Client) -> None:
    api.get("/health/live")
    response = api.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert "shardlog_catalog_version " in text
    assert 'shardlog_http_requests_total{method="GET",route="/health/live",status="200"}' in text
    assert 'shardlog_shard_state{group="group1",shard="shard01",state="active"} 1.0' in text
