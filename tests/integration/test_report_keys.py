"""Which keys a report covers: listed, by prefix, or every key the token reaches, resolved as a
search resolves them (router/search/coverage.py), against the real cluster.

Each module run has two fresh tenants whose keys all start with the module's stem: what a
report by prefix or without keys covers is exactly the caller's tenant's, never the other's. A
report by prefix or without keys must equal the report over the same keys listed."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
import orjson
import pytest
from fastapi.testclient import TestClient

from router import clock
from router.app import create_app
from router.auth.scopes import AUDIT_READ, DATA_SCOPES, FLOWS_READ, REPORTS
from router.settings import Settings
from tests.support import await_token, bearer, issue_token, run_cli

# Two days back, as in test_reports.py: every row of the window lies in the past.
DAY = clock.now().replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=2)
WINDOW = {"from": DAY.isoformat(), "to": (DAY + timedelta(days=2)).isoformat()}
PATHS = {"flow": "/v1/flows/report", "audit": "/v1/audit/report"}
FIELDS = {"flow": "switch", "audit": "owner"}
# Groupings compared between the forms of selection, with the metrics each reads.
FLOW_CHOICES: list[dict[str, Any]] = [
    {"group_by": "switch,src_ip", "metrics": "rows,bytes,distinct(dst_ip)"},
    {"metrics": "rows,flows,bytes,packets,min(first_seen),max(last_seen)"},
    {"group_by": "dst_port", "metrics": "bytes", "order_by": "bytes", "limit": 3},
]
AUDIT_CHOICES: list[dict[str, Any]] = [
    {"group_by": "owner,bucket", "bucket": "1h"},
    {"metrics": "rows,distinct(owner)"},
    {"group_by": "owner", "q": "failed"},
]


@dataclass
class Tenant:
    name: str
    client: httpx.Client
    switches: list[str]
    owners: list[str]


@dataclass
class World:
    stem: str  # every key of the module starts with it
    one: Tenant
    two: Tenant

    def keys(self, tenant: Tenant, kind: str) -> list[str]:
        return tenant.switches if kind == "flow" else tenant.owners


def _post(client: httpx.Client, path: str, records: list[dict[str, Any]]) -> None:
    body = b"".join(orjson.dumps(r) + b"\n" for r in records)
    response = client.post(path, content=body, headers={"content-type": "application/x-ndjson"})
    assert response.status_code == 200, response.text


def _flows(switch: str, seed: int) -> list[dict[str, Any]]:
    """Flows that differ from switch to switch (``seed``), so that a group of the wrong switch
    would show."""
    return [
        {
            "switch": switch,
            "src_ip": f"10.{seed}.{n % 4}.{n % 7 + 1}",
            "dst_ip": f"192.0.2.{n % 5 + 1}",
            "src_port": 40000 + n,
            "dst_port": (22, 53, 443, 8080)[(n + seed) % 4],
            "proto": 6,
            "bytes": 100 * seed + n,
            "packets": n % 9 + 1,
            "ts": (DAY + timedelta(hours=1 + n % 30, minutes=seed)).isoformat(),
        }
        for n in range(30 + 7 * seed)
    ]


def _audit(owner: str, seed: int) -> list[dict[str, Any]]:
    return [
        {
            "owner": owner,
            "ts": (DAY + timedelta(hours=n % 20, minutes=seed)).isoformat(),
            "content": f"login {'failed' if (n + seed) % 3 == 0 else 'ok'} {owner} #{n}",
        }
        for n in range(20 + 5 * seed)
    ]


def _tenant(settings, url: str, name: str, switches: list[str], owners: list[str]) -> Tenant:
    """A tenant whose token writes its keys' rows (the first write claims each key)."""
    token = await_token(url, issue_token(settings, name, DATA_SCOPES, name="tests: report keys"))
    client = httpx.Client(base_url=url, timeout=60, headers=bearer(token))
    seeds = iter(range(1, 100))
    for number in range(2):  # several requests: audit rows land on several shards
        _post(client, "/v1/audit", [r for o in owners for r in _audit(o, next(seeds))][number::2])
    _post(client, "/v1/flows", [f for s in switches for f in _flows(s, next(seeds))])
    return Tenant(name, client, switches, owners)


@pytest.fixture(scope="module")
def world(settings, router_process) -> Iterator[World]:
    stem = f"rkeys-{uuid.uuid4().hex[:8]}-"
    one = _tenant(
        settings,
        router_process.url,
        f"rkeys-a-{stem[6:14]}",
        [f"{stem}core-1", f"{stem}core-2", f"{stem}edge-1"],
        [f"{stem}app-1", f"{stem}app-2", f"{stem}db"],
    )
    # The other tenant's keys start like the first's: a prefix of the stem matches them too.
    two = _tenant(
        settings, router_process.url, f"rkeys-b-{stem[6:14]}", [f"{stem}core-9"], [f"{stem}app-9"]
    )
    try:
        yield World(stem, one, two)
    finally:
        one.client.close()
        two.client.close()


def report(client, kind: str, **params: Any) -> dict[str, Any]:
    response = client.get(PATHS[kind], params={**WINDOW, **params})
    assert response.status_code == 200, response.text
    assert response.json()["partial"] is False
    return response.json()


def refusal(client, kind: str, **params: Any) -> tuple[int, str, str]:
    response = client.get(PATHS[kind], params={**WINDOW, **params})
    error = response.json()["error"]
    return response.status_code, error["field"], error["message"]


def choices(kind: str) -> list[dict[str, Any]]:
    return FLOW_CHOICES if kind == "flow" else AUDIT_CHOICES


def reported_keys(client, kind: str, **params: Any) -> set[str]:
    field = FIELDS[kind]
    groups = report(client, kind, **params, group_by=field)["groups"]
    return {g[field] for g in groups}


@pytest.mark.parametrize("kind", ["flow", "audit"])
def test_a_prefix_or_no_key_equals_the_same_keys_listed(world, kind) -> None:
    field, client, stem = FIELDS[kind], world.one.client, world.stem
    mine = world.keys(world.one, kind)
    # The first two of tenant one's keys share a prefix the third lacks.
    prefix = mine[0][:-1]
    assert mine[1].startswith(prefix) and not mine[2].startswith(prefix)
    for choice in choices(kind):
        every = report(client, kind, **choice, **{field: mine})
        assert every["groups"] and every["groups"] != [{"rows": 0}]
        assert report(client, kind, **choice) == every
        assert report(client, kind, **choice, **{f"{field}_prefix": stem}) == every
        two = report(client, kind, **choice, **{field: mine[:2]})
        assert report(client, kind, **choice, **{f"{field}_prefix": prefix}) == two
        assert two["groups"] != every["groups"]
        # Together: the union, whatever is listed twice.
        both = {f"{field}_prefix": prefix, field: [mine[2], mine[0]]}
        assert report(client, kind, **choice, **both) == every


@pytest.mark.parametrize("kind", ["flow", "audit"])
def test_another_tenants_keys_are_never_covered(world, kind) -> None:
    field, stem = FIELDS[kind], world.stem
    for me, other in ((world.one, world.two), (world.two, world.one)):
        mine = world.keys(me, kind)
        for params in ({}, {f"{field}_prefix": stem}, {f"{field}_prefix": stem[:-1]}):
            assert reported_keys(me.client, kind, **params) == set(mine)
            total = report(me.client, kind, **params)["groups"]
            assert total == report(me.client, kind, **{field: mine})["groups"]
        theirs = world.keys(other, kind)[0]
        assert refusal(me.client, kind, **{field: [mine[0], theirs]})[:2] == (403, field)
        prefix = {f"{field}_prefix": theirs}  # a prefix that only the other's key matches
        assert report(me.client, kind, **prefix, group_by=field)["groups"] == []


@pytest.mark.parametrize("kind", ["flow", "audit"])
def test_a_token_with_key_prefixes_covers_only_those(settings, router_process, world, kind):
    field, stem = FIELDS[kind], world.stem
    core, app = f"{stem}core-", f"{stem}app-"
    scopes = [REPORTS, AUDIT_READ, FLOWS_READ, f"switch:{core}", f"owner:{app}"]
    token = issue_token(settings, world.one.name, scopes, name="tests: report key prefixes")
    await_token(router_process.url, token)
    reach = core if kind == "flow" else app
    inside = [k for k in world.keys(world.one, kind) if k.startswith(reach)]
    outside = next(k for k in world.keys(world.one, kind) if not k.startswith(reach))
    assert len(inside) == 2
    with httpx.Client(base_url=router_process.url, timeout=60, headers=bearer(token)) as client:
        for params in ({}, {f"{field}_prefix": stem}, {f"{field}_prefix": reach}):
            assert reported_keys(client, kind, **params) == set(inside)
        assert reported_keys(client, kind, **{f"{field}_prefix": inside[0]}) == {inside[0]}
        status, named, message = refusal(client, kind, **{f"{field}_prefix": outside})
        assert (status, named) == (403, f"{field}_prefix")
        assert "outside this token's" in message
        assert refusal(client, kind, **{field: outside})[:2] == (403, field)
        listed = world.one.client.get(PATHS[kind], params={**WINDOW, field: inside})
        assert report(client, kind) == listed.json()


def _narrow(settings: Settings, client: httpx.Client, **report_settings: Any) -> TestClient:
    narrow = settings.model_copy(
        update={"report": settings.report.model_copy(update=report_settings)}
    )
    return TestClient(
        create_app(narrow), headers={"Authorization": client.headers["Authorization"]}
    )


@pytest.mark.parametrize("kind", ["flow", "audit"])
def test_too_many_keys_is_a_400_naming_what_to_narrow(settings, world, kind) -> None:
    field, stem = FIELDS[kind], world.stem
    mine = world.keys(world.one, kind)
    with _narrow(settings, world.one.client, max_matched_keys=2, max_keys=2) as client:
        for params, named in (({}, field), ({f"{field}_prefix": stem}, f"{field}_prefix")):
            status, where, message = refusal(client, kind, **params)
            assert (status, where) == (400, named)
            assert "SHARDLOG_REPORT__MAX_MATCHED_KEYS" in message
        status, where, message = refusal(client, kind, **{field: mine})
        assert (status, where) == (400, field) and "SHARDLOG_REPORT__MAX_KEYS" in message
        # Two keys by prefix are within the limit, and listed keys do not count against it.
        two = {f"{field}_prefix": mine[0][:-1], field: mine[2:]}
        assert client.get(PATHS[kind], params={**WINDOW, **two}).status_code == 200
        # backend=fdw reads at most SHARDLOG_REPORT__MAX_KEYS keys: three are too many.
        status, where, message = refusal(client, kind, **two, backend="fdw")
        assert (status, where) == (400, "backend") and "backend=fanout" in message


@pytest.mark.parametrize("kind", ["flow", "audit"])
def test_fdw_equals_fanout_by_prefix_and_without_keys(world, kind) -> None:
    field, client, stem = FIELDS[kind], world.one.client, world.stem
    two = world.keys(world.one, kind)[0][:-1]
    for params in ({}, {f"{field}_prefix": stem}, {f"{field}_prefix": two}):
        for choice in choices(kind):
            fanout = report(client, kind, **params, **choice, backend="fanout")
            assert report(client, kind, **params, **choice, backend="fdw") == fanout


def test_the_cli_takes_a_prefix_or_no_key(settings, world) -> None:
    token = world.one.client.headers["Authorization"].removeprefix("Bearer ")
    window = ("--from", WINDOW["from"], "--to", WINDOW["to"], "--token", token)

    def switches(*selection: str) -> set[str]:
        printed = run_cli(settings, "report", "flows", *selection, *window, "--group-by", "switch")
        assert printed.returncode == 0, printed.stderr
        lines = printed.stdout.splitlines()
        assert lines[0].split() == ["SWITCH", "ROWS"]
        return {line.split()[0] for line in lines[1:]}

    assert switches("--prefix", f"{world.stem}core-") == set(world.one.switches[:2])
    assert switches() == set(world.one.switches)
    assert switches(world.one.switches[2], "--prefix", f"{world.stem}core-1") == {
        world.one.switches[0],
        world.one.switches[2],
    }
