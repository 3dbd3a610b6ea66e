"""A refused write claims no key: through every HTTP ingest path (REST JSON and NDJSON audit,
JSON, NDJSON and CSV flows, Elasticsearch _bulk, OTLP; Loki in test_loki_otlp.py), a key is
mapped to the writer's tenant only when a row of it is stored. The oracle is the catalog as
the admin API shows it (404 for a key not mapped), and the rows a search finds. Claims stay
race-safe: two tenants' writes racing for one new key leave the loser's other keys free."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import httpx
import orjson
import pytest

from router import clock
from router.auth.scopes import DATA_SCOPES
from router.settings import Settings
from services.router_process import RouterProcess
from tests.support import await_token, bearer, issue_token

NOW = clock.now()
RECENT = (NOW - timedelta(minutes=2)).isoformat()
WINDOW = {
    "from": (NOW - timedelta(days=1)).isoformat(),
    "to": (NOW + timedelta(hours=1)).isoformat(),
}
FLOW = {"src_ip": "10.7.0.1", "dst_ip": "10.7.0.2", "src_port": 1, "dst_port": 2, "bytes": 10}


@pytest.fixture
def tenant_token(router_process: RouterProcess, settings: Settings) -> Callable[[str], str]:
    """A read/write token of a new tenant, once the router knows it."""

    def issue(tenant: str) -> str:
        token = issue_token(settings, tenant, DATA_SCOPES, name="tests: claims")
        return await_token(router_process.url, token)

    return issue


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def too_old(settings: Settings) -> str:
    """A ts well before any day the default retention keeps, whatever the hour."""
    return (NOW - timedelta(days=settings.ingest.default_keep_days + 5)).isoformat()


def mapped(admin_api: httpx.Client, kind: str, key: str) -> str | None:
    """The tenant ``key`` is mapped to, or None when it is not mapped."""
    answer = admin_api.get("/v1/admin/owners", params={"kind": kind, "key": key})
    if answer.status_code == 404:
        return None
    assert answer.status_code == 200, answer.text
    tenant: str = answer.json()["tenant"]
    return tenant


def ndjson(records: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(record) + b"\n" for record in records)


def audit_body(form: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    if form == "json":
        return {"json": records}
    return {"content": ndjson(records), "headers": {"content-type": "application/x-ndjson"}}


def flow_body(form: str, records: list[dict[str, Any]]) -> dict[str, Any]:
    if form == "csv":
        columns = ["switch", "ts", "src_ip", "dst_ip", "src_port", "dst_port", "bytes"]
        lines = [",".join(columns)] + [",".join(str(r[c]) for c in columns) for r in records]
        return {"content": "\n".join(lines).encode(), "headers": {"content-type": "text/csv"}}
    return audit_body(form, records)


@pytest.mark.parametrize("form", ["json", "ndjson"])
def test_a_refused_audit_write_claims_none_of_its_keys(
    api: httpx.Client, admin_api: httpx.Client, settings: Settings, form: str
) -> None:
    fine, old = unique("claim-fine"), unique("claim-old")
    records = [
        {"owner": fine, "content": "would be fine", "ts": RECENT},
        {"owner": old, "content": "x", "ts": too_old(settings)},
    ]
    answer = api.post("/v1/audit", **audit_body(form, records))
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] == "records[1].ts"
    assert mapped(admin_api, "audit", fine) is None
    assert mapped(admin_api, "audit", old) is None
    # The good row alone is written, and claims its key.
    written = api.post("/v1/audit", **audit_body(form, records[:1]))
    assert written.status_code == 200, written.text
    assert mapped(admin_api, "audit", fine) == "system"


def test_a_known_keys_old_row_refuses_the_claim_of_a_new_key_beside_it(
    api: httpx.Client, admin_api: httpx.Client, settings: Settings
) -> None:
    known, fresh = unique("claim-known"), unique("claim-fresh")
    assert api.post("/v1/audit", json=[{"owner": known, "content": "x"}]).status_code == 200
    records = [
        {"owner": fresh, "content": "would be fine", "ts": RECENT},
        {"owner": known, "content": "too old", "ts": too_old(settings)},
    ]
    answer = api.post("/v1/audit", json=records)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["field"] == "records[1].ts"
    assert mapped(admin_api, "audit", fresh) is None


@pytest.mark.parametrize("form", ["json", "ndjson", "csv"])
def test_a_refused_flow_write_claims_none_of_its_switches(
    api: httpx.Client, admin_api: httpx.Client, settings: Settings, form: str
) -> None:
    fine, old = unique("claim-sw"), unique("claim-sw-old")
    records = [
        {**FLOW, "switch": fine, "ts": RECENT},
        {**FLOW, "switch": old, "ts": too_old(settings)},
    ]
    answer = api.post("/v1/flows", **flow_body(form, records))
    assert answer.status_code == 422, answer.text
    # CSV errors name the line (the header is line 1).
    field = "lines[3].ts" if form == "csv" else "records[1].ts"
    assert answer.json()["error"]["field"] == field
    assert mapped(admin_api, "flow", fine) is None
    assert mapped(admin_api, "flow", old) is None


def test_a_write_refused_for_a_foreign_key_claims_none_of_its_own(
    router_process: RouterProcess,
    default_api: httpx.Client,
    admin_api: httpx.Client,
    tenant_token: Callable[[str], str],
) -> None:
    """A key of another tenant refuses the write (403) before any of its new keys is claimed."""
    foreign = unique("claim-foreign")
    taken = default_api.post("/v1/audit", json=[{"owner": foreign, "content": "x"}])
    assert taken.status_code == 200, taken.text
    other = tenant_token(unique("claimer"))
    mine = unique("claim-mine")
    with httpx.Client(base_url=router_process.url, timeout=30, headers=bearer(other)) as client:
        answer = client.post(
            "/v1/audit",
            json=[{"owner": mine, "content": "x"}, {"owner": foreign, "content": "y"}],
        )
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"]["field"] == "records[1].owner"
    assert mapped(admin_api, "audit", mine) is None
    assert mapped(admin_api, "audit", foreign) == "default"


def test_an_idempotency_key_reused_for_another_body_claims_nothing(
    api: httpx.Client, admin_api: httpx.Client
) -> None:
    key = unique("claim-idem")
    first = api.post(
        "/v1/audit",
        json=[{"owner": unique("claim-first"), "content": "x"}],
        headers={"Idempotency-Key": key},
    )
    assert first.status_code == 200, first.text
    fresh = unique("claim-second")
    again = api.post(
        "/v1/audit",
        json=[{"owner": fresh, "content": "other body"}],
        headers={"Idempotency-Key": key},
    )
    assert again.status_code == 422, again.text
    assert again.json()["error"]["field"] == "Idempotency-Key"
    assert mapped(admin_api, "audit", fresh) is None


def test_a_refused_bulk_item_claims_nothing_and_the_others_are_written(
    api: httpx.Client, admin_api: httpx.Client, settings: Settings
) -> None:
    fine, old = unique("claim-bulk"), unique("claim-bulk-old")
    action = orjson.dumps({"create": {"_index": "logs"}})
    body = b"".join(
        action + b"\n" + orjson.dumps(doc) + b"\n"
        for doc in (
            {"owner": fine, "message": "kept", "@timestamp": RECENT},
            {"owner": old, "message": "too old", "@timestamp": too_old(settings)},
        )
    )
    answer = api.post("/_bulk", content=body, headers={"content-type": "application/x-ndjson"})
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert result["errors"] is True
    statuses = [next(iter(item.values()))["status"] for item in result["items"]]
    assert statuses[0] in (200, 201) and statuses[1] >= 400, result
    assert mapped(admin_api, "audit", fine) == "system"
    assert mapped(admin_api, "audit", old) is None


def test_a_rejected_otlp_record_claims_nothing(
    api: httpx.Client, admin_api: httpx.Client, settings: Settings
) -> None:
    fine, old = unique("claim-otel"), unique("claim-otel-old")
    stamp = int((NOW - timedelta(days=settings.ingest.default_keep_days + 5)).timestamp())

    def resource(owner: str, nanos: int, body: str) -> dict[str, Any]:
        attributes = [{"key": "service.name", "value": {"stringValue": owner}}]
        record = {"timeUnixNano": str(nanos), "body": {"stringValue": body}}
        return {"resource": {"attributes": attributes}, "scopeLogs": [{"logRecords": [record]}]}

    recent = int(datetime.fromisoformat(RECENT).timestamp()) * 10**9
    request = {"resourceLogs": [resource(fine, recent, "kept"), resource(old, stamp * 10**9, "x")]}
    answer = api.post("/v1/logs", json=request)
    assert answer.status_code == 200, answer.text
    assert answer.json()["partialSuccess"]["rejectedLogRecords"] == 1
    assert mapped(admin_api, "audit", fine) == "system"
    assert mapped(admin_api, "audit", old) is None


def test_two_tenants_racing_for_a_new_key_leave_the_losers_keys_unclaimed(
    router_process: RouterProcess, admin_api: httpx.Client, tenant_token: Callable[[str], str]
) -> None:
    """Each round both tenants write a shared new key with a new key of their own, at once:
    one wins the shared key and claims its own, the other is refused (403) and claims
    nothing, however the two interleave."""
    tokens = {name: tenant_token(name) for name in (unique("racer-a"), unique("racer-b"))}
    clients = {
        name: httpx.Client(base_url=router_process.url, timeout=30, headers=bearer(token))
        for name, token in tokens.items()
    }
    try:
        for _ in range(12):
            shared = unique("race-shared")
            own = {name: unique(f"race-own-{name[:7]}") for name in clients}
            answers = at_once(
                {
                    name: [{"owner": own[name], "content": "x"}, {"owner": shared, "content": "y"}]
                    for name in clients
                },
                clients,
            )
            statuses = sorted(answer.status_code for answer in answers.values())
            assert statuses == [200, 403], {n: a.text for n, a in answers.items()}
            winner = next(n for n, a in answers.items() if a.status_code == 200)
            loser = next(n for n in clients if n != winner)
            assert mapped(admin_api, "audit", shared) == winner
            assert mapped(admin_api, "audit", own[winner]) == winner
            assert mapped(admin_api, "audit", own[loser]) is None
    finally:
        for client in clients.values():
            client.close()


def at_once(
    records: dict[str, list[dict[str, Any]]], clients: dict[str, httpx.Client]
) -> dict[str, httpx.Response]:
    """Each client's records posted from its own thread, released together."""
    answers: dict[str, httpx.Response] = {}
    start = threading.Barrier(len(records))

    def write(name: str) -> None:
        start.wait()
        answers[name] = clients[name].post("/v1/audit", json=records[name])

    threads = [threading.Thread(target=write, args=(name,)) for name in records]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers
