"""Catalog changes through the admin API and the CLI, seen by a running router."""

from __future__ import annotations

import time
import uuid

import asyncpg
import httpx
import pytest

from router.catalog.cache import LISTENER_APPLICATION_NAME
from router.settings import Settings
from services.cluster import LocalCluster
from services.process import free_port
from tests.support import eventually, run_cli


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def new_database(cluster: LocalCluster, shard: str = "shard01") -> str:
    """A fresh database on one shard instance; returns its DSN."""
    name = unique("extra_")
    instance = cluster.instances[shard]
    instance.psql("postgres", f"CREATE DATABASE {name}")
    return instance.spec.dsn(name)


def group_names(api: httpx.Client) -> set[str]:
    return {g["name"] for g in api.get("/v1/admin/groups").json()}


def shard_by_name(api: httpx.Client, name: str) -> dict | None:
    return next((s for s in api.get("/v1/admin/shards").json() if s["name"] == name), None)


def test_catalog_lists_the_local_topology(api: httpx.Client, cluster: LocalCluster) -> None:
    catalog = api.get("/v1/admin/catalog").json()
    names = {s["name"] for s in catalog["shards"]}
    assert {s.spec.name for s in cluster.shards} <= names
    groups = {g["name"]: g for g in catalog["groups"]}
    assert {"group1", "group2"} <= set(groups)
    assert groups["group1"]["shards"][:2] == ["shard01", "shard02"]


def test_group_added_by_cli_reaches_router_by_notify(api: httpx.Client, settings: Settings) -> None:
    name = unique("cli")
    started = time.monotonic()
    result = run_cli(settings, "groups", "add", name, "--placement", "hash")
    assert result.returncode == 0, result.stderr
    eventually(
        lambda: name in group_names(api),
        timeout=settings.catalog.poll_interval_s - 0.5,
        interval=0.05,
    )
    assert time.monotonic() - started < 10
    listed = run_cli(settings, "groups", "list", "--json")
    assert any(
        g["name"] == name and g["placement"] == "hash"
        for g in __import__("json").loads(listed.stdout)
    )


async def test_polling_catches_up_when_the_listener_is_lost(
    api: httpx.Client, settings: Settings
) -> None:
    connection = await asyncpg.connect(settings.metadata_dsn())
    try:
        killed = await connection.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE application_name = $1",
            LISTENER_APPLICATION_NAME,
        )
        assert killed >= 1
        name = unique("poll")
        await connection.execute(
            "INSERT INTO shard_groups (name, placement) VALUES ($1, 'random')", name
        )
    finally:
        await connection.close()
    eventually(lambda: name in group_names(api), timeout=3 * settings.catalog.poll_interval_s)


def test_shard_added_by_api_then_drained_by_cli(
    api: httpx.Client, settings: Settings, cluster: LocalCluster
) -> None:
    name = unique("s")
    dsn = new_database(cluster)
    response = api.post("/v1/admin/shards", json={"name": name, "group": "group1", "dsn": dsn})
    assert response.status_code == 201, response.text
    assert response.json()["state"] == "active"
    assert shard_by_name(api, name) is not None
    ready = api.get("/health/ready").json()
    assert any(s["name"] == name and s["reachable"] for s in ready["shards"])

    result = run_cli(settings, "shards", "drain", name)
    assert result.returncode == 0, result.stderr
    eventually(lambda: (shard_by_name(api, name) or {}).get("state") == "draining")

    response = api.patch(f"/v1/admin/shards/{name}", json={"state": "active"})
    assert response.status_code == 200
    listed = run_cli(settings, "shards", "list")
    assert any(
        line.split()[:3] == [name, "group1", "active"] for line in listed.stdout.splitlines()
    )


def test_shard_added_by_cli_is_migrated_and_visible(
    api: httpx.Client, settings: Settings, cluster: LocalCluster
) -> None:
    name = unique("c")
    dsn = new_database(cluster, "shard03")
    result = run_cli(settings, "shards", "add", name, "--group", "group2", "--dsn", dsn)
    assert result.returncode == 0, result.stderr
    eventually(lambda: shard_by_name(api, name))
    database = dsn.rsplit("/", 1)[1]
    stamped = cluster.instances["shard03"].psql(database, "SELECT shard_name FROM shard_identity")
    assert stamped.strip() == name


def test_drain_through_the_drain_endpoint(api: httpx.Client, cluster: LocalCluster) -> None:
    name = unique("d")
    api.post(
        "/v1/admin/shards",
        json={"name": name, "group": "group2", "dsn": new_database(cluster, "shard02")},
    )
    response = api.post(f"/v1/admin/shards/{name}/drain")
    assert response.status_code == 200
    assert response.json()["state"] == "draining"


@pytest.mark.parametrize(
    ("body", "status", "field", "words"),
    [
        (
            {"name": "bad1", "group": "no-such-group", "dsn": "postgresql://h/x"},
            404,
            "group",
            "does not exist",
        ),
        ({"name": "bad2", "group": "group1", "dsn": "postgresql://h:0/x"}, 422, "dsn", "port"),
        ({"name": "bad3", "group": "group1", "dsn": "not a dsn"}, 422, "dsn", "malformed"),
        (
            {"name": "Bad Name", "group": "group1", "dsn": "postgresql://h/x"},
            422,
            "name",
            "not a valid name",
        ),
        (
            {"name": "shard01", "group": "group1", "dsn": "postgresql://h/x"},
            409,
            "name",
            "already exists",
        ),
        ({"name": "bad4", "group": "group1"}, 422, "dsn", "required"),
        (
            {"name": "bad5", "group": "group1", "dsn": "postgresql://h/x", "extra": 1},
            422,
            "extra",
            "not permitted",
        ),
    ],
)
def test_bad_shard_input_names_the_field(
    api: httpx.Client, body: dict, status: int, field: str, words: str
) -> None:
    response = api.post("/v1/admin/shards", json=body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["field"] == field
    assert words in error["message"].lower()


def test_duplicate_dsn_is_refused(api: httpx.Client, cluster: LocalCluster) -> None:
    existing = cluster.shards[0].spec.dsn()
    response = api.post(
        "/v1/admin/shards", json={"name": unique("dup"), "group": "group1", "dsn": existing}
    )
    assert response.status_code == 409
    assert response.json()["error"]["field"] == "dsn"


def test_same_database_under_another_spelling_is_refused(
    api: httpx.Client, cluster: LocalCluster
) -> None:
    spec = cluster.shards[1].spec
    other_spelling = f"host={spec.host} port={spec.port} dbname=shardlog user=shardlog"
    response = api.post(
        "/v1/admin/shards", json={"name": unique("twin"), "group": "group1", "dsn": other_spelling}
    )
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["field"] == "dsn"
    assert spec.name in error["message"]


def test_unreachable_shard_is_refused(api: httpx.Client) -> None:
    dsn = f"postgresql://shardlog@127.0.0.1:{free_port()}/shardlog"
    response = api.post(
        "/v1/admin/shards", json={"name": unique("gone"), "group": "group1", "dsn": dsn}
    )
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "dsn"
    assert "cannot connect" in response.json()["error"]["message"]


def test_group_input_errors(api: httpx.Client) -> None:
    response = api.post("/v1/admin/groups", json={"name": "group1", "placement": "random"})
    assert (response.status_code, response.json()["error"]["field"]) == (409, "name")
    response = api.post("/v1/admin/groups", json={"name": unique("g"), "placement": "spread"})
    assert (response.status_code, response.json()["error"]["field"]) == (422, "placement")
    response = api.post(
        "/v1/admin/groups", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid"


def test_unknown_shard_state_change(api: httpx.Client) -> None:
    response = api.post("/v1/admin/shards/no-such-shard/drain")
    assert (response.status_code, response.json()["error"]["field"]) == (404, "name")
    response = api.patch("/v1/admin/shards/shard01", json={"state": "sleeping"})
    assert (response.status_code, response.json()["error"]["field"]) == (422, "state")


def test_cli_errors_name_the_field(settings: Settings) -> None:
    result = run_cli(
        settings, "shards", "add", "x9", "--group", "nope", "--dsn", "postgresql://h/x"
    )
    assert result.returncode == 2
    assert "(group)" in result.stderr and "does not exist" in result.stderr
    result = run_cli(settings, "shards", "add", "x9", "--group", "group1", "--dsn", "h=")
    assert result.returncode == 2 and "(dsn)" in result.stderr


def test_owner_mapping_via_api_and_cli(api: httpx.Client, settings: Settings) -> None:
    key = "tenant 'quoted'; DROP TABLE owners; -- ü"
    response = api.put(
        "/v1/admin/owners",
        json={"kind": "audit", "key": key, "group": "group1", "tenant": "system"},
    )
    assert response.status_code == 200, response.text
    assert response.json()["assigned_by"] == "admin"
    response = api.put(
        "/v1/admin/owners",
        json={"kind": "audit", "key": key, "group": "group2", "tenant": "system"},
    )
    assert (response.status_code, response.json()["error"]["field"]) == (409, "group")
    result = run_cli(settings, "owners", "map", "audit", key, "group2", "--force")
    assert result.returncode == 0, result.stderr
    response = api.get("/v1/admin/owners", params={"kind": "audit", "key": key})
    assert response.json()["group"] == "group2"
    shown = run_cli(settings, "owners", "show", "audit", key)
    assert "group2" in shown.stdout
    response = api.get("/v1/admin/owners", params={"kind": "flow", "key": key})
    assert (response.status_code, response.json()["error"]["field"]) == (404, "key")
    response = api.put(
        "/v1/admin/owners", json={"kind": "audit", "key": key, "group": "nope", "tenant": "system"}
    )
    assert (response.status_code, response.json()["error"]["field"]) == (404, "group")


def test_catalog_show_cli_hides_passwords(settings: Settings) -> None:
    result = run_cli(settings, "catalog", "show")
    assert result.returncode == 0
    assert '"version"' in result.stdout
