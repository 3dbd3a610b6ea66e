"""Row permalinks against the real cluster: every item of a search fetched by its ref is that
item; a ref outlives merges into its flow and not its day; refs of another tenant are refused."""

from __future__ import annotations

import uuid
from datetime import timedelta

import httpx
import orjson
import pytest

from bench.shard_view import catalog_shards, day_tables, owner_id, shard_sql
from router.auth.scopes import DATA_SCOPES
from tests.integration.test_search import DAY, FROM, TO, post
from tests.support import await_token, bearer, issue_token


def everything(api, path: str, params: dict) -> list[dict]:
    response = api.get(path, params={**params, "from": FROM, "to": TO, "limit": 10_000})
    assert response.status_code == 200, response.text
    return response.json()["items"]


@pytest.fixture(scope="module")
def audit_owner(api) -> str:
    owner = f"rows-{uuid.uuid4().hex[:8]}"
    for request in range(8):  # several requests land on several shards
        records = [
            {"owner": owner, "ts": (DAY + timedelta(hours=i)).isoformat(), "content": f"{i}"}
            for i in range(request, 48, 8)
        ]
        records[0]["attrs"] = {"request": request, "nested": [1, {"a": None}]}
        post(api, "/v1/audit", records)
    return owner


@pytest.fixture(scope="module")
def flow_switch(api) -> str:
    switch = f"rows-sw-{uuid.uuid4().hex[:8]}"
    flows = [
        {
            "switch": switch,
            "src_ip": f"10.4.0.{n}" if n % 2 else f"2001:db8::{n:x}",
            "dst_ip": "192.0.2.1" if n % 2 else "::ffff:192.0.2.1",
            "src_port": 1000 + n,
            "dst_port": 53,
            **({"proto": 17} if n % 3 else {}),
            "bytes": n,
            "ts": (DAY + timedelta(minutes=n)).isoformat(),
        }
        for n in range(30)
    ]
    post(api, "/v1/flows", flows)
    return switch


def test_every_audit_item_is_fetched_by_its_ref(api, audit_owner) -> None:
    items = everything(api, "/v1/audit/search", {"owner": audit_owner})
    assert len({i["shard"] for i in items}) >= 2 and len({i["ref"] for i in items}) == len(items)
    for item in items:
        response = api.get(f"/v1/audit/rows/{item['ref']}")
        assert response.status_code == 200, response.text
        assert response.json() == item


def test_every_flow_is_fetched_by_its_ref_also_after_merges(api, flow_switch) -> None:
    switch = flow_switch
    items = everything(api, "/v1/flows/search", {"switch": switch})
    assert len(items) == 30 and {i["proto"] for i in items} == {None, 17}
    for item in items:
        assert api.get(f"/v1/flows/rows/{item['ref']}").json() == item
    merged = items[0]
    later = {
        "switch": switch,
        **{k: merged[k] for k in ("src_ip", "dst_ip", "src_port", "dst_port", "proto")},
        "bytes": 5,
        "ts": (DAY + timedelta(hours=22)).isoformat(),
    }
    post(api, "/v1/flows", [later])
    fetched = api.get(f"/v1/flows/rows/{merged['ref']}").json()
    assert fetched["flow_count"] == merged["flow_count"] + 1
    assert fetched["bytes"] == merged["bytes"] + 5 and fetched["ref"] == merged["ref"]


def test_export_lines_carry_the_same_refs(api, audit_owner) -> None:
    params = {"owner": audit_owner, "from": FROM, "to": TO}
    exported = [
        orjson.loads(line)
        for line in api.get("/v1/audit/export", params=params).content.splitlines()
    ]
    assert [i["ref"] for i in exported] == [
        i["ref"] for i in everything(api, "/v1/audit/search", {"owner": audit_owner})
    ]


def test_a_ref_of_a_dropped_day_is_a_404(api) -> None:
    owner = f"rows-{uuid.uuid4().hex[:8]}"
    post(api, "/v1/audit", [{"owner": owner, "ts": DAY.isoformat(), "content": "short-lived"}])
    [item] = everything(api, "/v1/audit/search", {"owner": owner})
    assert api.get(f"/v1/audit/rows/{item['ref']}").status_code == 200
    # As retention drops a day: the table goes, the registry entry may linger.
    [(shard, [table])] = day_tables(api, "audit", owner_id(api, "audit", owner)).items()
    shard_sql(catalog_shards(api)[shard], f'DROP TABLE "{table}"')
    response = api.get(f"/v1/audit/rows/{item['ref']}")
    assert (response.status_code, response.json()["error"]["field"]) == (404, "ref")


def test_a_deleted_flow_is_a_404(api) -> None:
    switch = f"rows-sw-{uuid.uuid4().hex[:8]}"
    flow = {"src_ip": "10.3.0.1", "dst_ip": "10.3.0.2", "src_port": 7, "dst_port": 8, "proto": 17}
    post(api, "/v1/flows", [{"switch": switch, **flow, "bytes": 1, "ts": DAY.isoformat()}])
    [item] = everything(api, "/v1/flows/search", {"switch": switch})
    day = DAY.date().isoformat()
    removal = {"switch": switch, "from": day, "to": day, "flows": [flow]}
    assert api.request("DELETE", "/v1/flows", json=removal).json() == {"removed": 1}
    assert api.get(f"/v1/flows/rows/{item['ref']}").status_code == 404


@pytest.mark.parametrize("ref", ["garbage", "A" * 300, "AQEAAAAA", "%F0%9F%92%A9"])
def test_garbage_is_a_400_naming_ref(api, ref) -> None:
    for path in ("/v1/audit/rows/", "/v1/flows/rows/"):
        response = api.get(path + ref)
        assert response.status_code == 400, response.text
        assert response.json()["error"]["field"] == "ref"


def test_a_ref_of_the_other_kind_is_a_400(api, audit_owner) -> None:
    [item, *_] = everything(api, "/v1/audit/search", {"owner": audit_owner})
    response = api.get(f"/v1/flows/rows/{item['ref']}")
    assert (response.status_code, response.json()["error"]["field"]) == (400, "ref")
    assert "/v1/audit/rows/" in response.json()["error"]["message"]


def test_another_tenants_token_gets_a_403_that_names_nobody(
    api, settings, router_process, audit_owner, flow_switch
) -> None:
    [audit, *_] = everything(api, "/v1/audit/search", {"owner": audit_owner})
    [flow, *_] = everything(api, "/v1/flows/search", {"switch": flow_switch})
    token = issue_token(settings, f"rows-t-{uuid.uuid4().hex[:8]}", DATA_SCOPES)
    await_token(router_process.url, token)
    with httpx.Client(base_url=router_process.url, headers=bearer(token), timeout=30) as other:
        for path, item, key in (
            ("/v1/audit/rows/", audit, audit_owner),
            ("/v1/flows/rows/", flow, flow_switch),
        ):
            response = other.get(path + item["ref"])
            assert response.status_code == 403, response.text
            assert response.json()["error"]["field"] == "ref"
            assert key not in response.text and item["shard"] not in response.text
