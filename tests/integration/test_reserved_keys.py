"""No ingest path writes a key of the platform (``shardlog.*``), not even with a token of the
`system` tenant holding every scope: REST audit and flows, Loki, Elasticsearch _bulk and OTLP
answer 403 naming the field (a _bulk item alone), write nothing and claim nothing; the
router's own self-audit still writes ``shardlog.admin``. The syslog listener and the collector
refuse and count them (tests/syslog/test_reserved_owner.py, tests/flowtruth/
test_reserved_switch.py)."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import httpx
import orjson
import pytest

from tests.integration.test_write_claims import RECENT, WINDOW, mapped, unique

FLOW = {"src_ip": "10.8.0.1", "dst_ip": "10.8.0.2", "src_port": 1, "dst_port": 2, "bytes": 10}


def stored(api: httpx.Client, owner: str, marker: str) -> list[dict[str, Any]]:
    params: dict[str, str | int] = {"owner": owner, **WINDOW, "q": marker, "limit": 100}
    answer = api.get("/v1/audit/search", params=params)
    if answer.status_code == 404:
        return []
    assert answer.status_code == 200, answer.text
    items: list[dict[str, Any]] = answer.json()["items"]
    return items


def refused(answer: httpx.Response, field: str) -> None:
    assert answer.status_code == 403, answer.text
    error = answer.json()["error"]
    assert error["field"] == field and "reserved for the platform" in error["message"], error


def loki_push(owner: str, line: str) -> dict[str, Any]:
    ns = str(int(datetime.fromisoformat(RECENT).timestamp()) * 10**9)
    return {"streams": [{"stream": {"owner": owner}, "values": [[ns, line]]}]}


def otlp_logs(owner: str, line: str) -> dict[str, Any]:
    ns = str(int(datetime.fromisoformat(RECENT).timestamp()) * 10**9)
    attributes = [{"key": "service.name", "value": {"stringValue": owner}}]
    record = {"timeUnixNano": ns, "body": {"stringValue": line}}
    resource = {"resource": {"attributes": attributes}, "scopeLogs": [{"logRecords": [record]}]}
    return {"resourceLogs": [resource]}


@pytest.mark.parametrize("owner", ["shardlog.admin", "shardlog.forged"])
def test_no_http_ingest_path_writes_a_platform_owner(
    api: httpx.Client, admin_api: httpx.Client, owner: str
) -> None:
    marker = unique("forged")
    ndjson = orjson.dumps({"owner": owner, "content": marker, "ts": RECENT}) + b"\n"
    refused(api.post("/v1/audit", json=[{"owner": owner, "content": marker}]), "records[0].owner")
    refused(
        api.post("/v1/audit", content=ndjson, headers={"content-type": "application/x-ndjson"}),
        "records[0].owner",
    )
    refused(api.post("/loki/api/v1/push", json=loki_push(owner, marker)), "streams[0].owner")
    refused(api.post("/v1/logs", json=otlp_logs(owner, marker)), "resourceLogs[0].owner")
    assert stored(api, owner, marker) == []
    if owner != "shardlog.admin":
        assert mapped(admin_api, "audit", owner) is None


def test_a_bulk_item_of_a_platform_owner_is_refused_alone(
    api: httpx.Client, admin_api: httpx.Client
) -> None:
    marker, fine, forged = unique("bulk-forged"), unique("bulk-fine"), unique("shardlog.bulk")
    action = orjson.dumps({"create": {"_index": "logs"}})
    body = b"".join(
        action + b"\n" + orjson.dumps({"owner": owner, "message": marker}) + b"\n"
        for owner in (forged, fine)
    )
    answer = api.post("/_bulk", content=body, headers={"content-type": "application/x-ndjson"})
    assert answer.status_code == 200, answer.text
    items = [next(iter(item.values())) for item in answer.json()["items"]]
    assert items[0]["status"] == 403 and "reserved" in items[0]["error"]["reason"], items
    assert items[1]["status"] in (200, 201), items
    assert [item["content"] for item in stored(api, fine, marker)] == [marker]
    assert mapped(admin_api, "audit", forged) is None


def test_no_flow_write_names_a_platform_switch(api: httpx.Client, admin_api: httpx.Client) -> None:
    switch = unique("shardlog.switch")
    answer = api.post("/v1/flows", json=[{**FLOW, "switch": switch, "ts": RECENT}])
    refused(answer, "records[0].switch")
    csv = f"switch,src_ip,dst_ip,src_port,dst_port\n{switch},10.8.0.1,10.8.0.2,1,2\n"
    refused(
        api.post("/v1/flows", content=csv.encode(), headers={"content-type": "text/csv"}),
        "lines[2].switch",
    )
    assert mapped(admin_api, "flow", switch) is None


def test_the_self_audit_still_writes_the_platform_owner(
    api: httpx.Client, admin_api: httpx.Client
) -> None:
    tenant = unique("reserved-t")
    assert admin_api.post("/v1/admin/tenants", json={"name": tenant}).status_code == 201
    deadline = time.monotonic() + 15
    while not stored(api, "shardlog.admin", tenant):
        assert time.monotonic() < deadline, "the self-audit row of tenant.add never came"
        time.sleep(0.2)
