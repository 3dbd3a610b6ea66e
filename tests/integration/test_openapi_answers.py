"""What the router really answers matches /openapi.json: every operation is called with data
behind it (rows to search and export, a retention run with drops), and each answer is checked
against the schema documented for its operation and status. Also the regressions the fuzz run
(test_fuzz_openapi.py) found outside ingest and search parsing."""

from __future__ import annotations

import json
import re
import uuid
from datetime import timedelta
from typing import Any

import httpx
import orjson
import pytest
from jsonschema import Draft202012Validator

from router import clock
from tests.support import run_cli

NOW = clock.now().replace(microsecond=0)
# TO leaves room for the rows this module writes at "now", however late in the session it runs.
FROM, TO = (NOW - timedelta(days=3)).isoformat(), (NOW + timedelta(hours=6)).isoformat()
NDJSON = "application/x-ndjson"


@pytest.fixture(scope="module")
def doc(api) -> dict[str, Any]:
    return api.get("/openapi.json").json()


def conforms(doc: dict[str, Any], response: httpx.Response, path: str | None = None) -> None:
    """The answer is documented for its operation and status, and matches that schema."""
    method, path = response.request.method.lower(), path or response.request.url.path
    documented = doc["paths"][path][method]["responses"].get(str(response.status_code))
    assert documented, f"{method} {path} answered {response.status_code}: {response.text}"
    if "content" not in documented:
        assert response.content == b""
        return
    media = response.headers["content-type"].split(";")[0]
    assert media in documented["content"], f"{method} {path}: {media} is not documented"
    schema = documented["content"][media]["schema"]
    validator = Draft202012Validator({**schema, "components": doc["components"]})
    if media == "application/json":
        bodies = [response.json()]
    elif media == NDJSON:
        bodies = [orjson.loads(line) for line in response.content.splitlines()]
    else:
        bodies = [response.text]
    for body in bodies:
        problems = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(body)]
        assert not problems, f"{method} {path} {response.status_code}: {problems}"


def ok(doc, response: httpx.Response, status: int = 200, path: str | None = None) -> Any:
    assert response.status_code == status, response.text
    conforms(doc, response, path)
    return (
        response.json() if response.headers["content-type"].startswith("application/json") else None
    )


def test_writes_searches_and_exports_answer_as_documented(api, doc) -> None:
    owner, switch = f"oa-{uuid.uuid4().hex[:8]}", f"oa-sw-{uuid.uuid4().hex[:8]}"
    records = [
        {"owner": owner, "ts": (NOW - timedelta(minutes=i)).isoformat(), "content": f"row {i}"}
        for i in range(5)
    ]
    records[0]["attrs"] = {"ip": "192.0.2.4", "nested": {"n": [1, 2]}}
    ok(doc, api.post("/v1/audit", json=records))
    ndjson = b"".join(orjson.dumps(r) + b"\n" for r in records)
    ok(doc, api.post("/v1/audit", content=ndjson, headers={"content-type": NDJSON}))
    flow = {"switch": switch, "src_ip": "10.0.0.1", "dst_ip": "10.0.0.2", "src_port": 5}
    flows = [{**flow, "dst_port": port, "proto": 6, "bytes": 100} for port in (80, 443)]
    flows.append(
        {**flow, "src_ip": "2001:db8::1", "dst_ip": "2001:db8::2", "dst_port": 1, "bytes": 7}
    )
    ok(doc, api.post("/v1/flows", json=flows))
    csv = b"10.0.0.3,10.0.0.4,1000,53,IPv4\r\n10.0.0.3,10.0.0.4,1001,53,IPv4\r\n"
    response = api.post(
        "/v1/flows", params={"switch": switch}, content=csv, headers={"content-type": "text/csv"}
    )
    ok(doc, response)

    page = ok(
        doc,
        api.get(
            "/v1/audit/search",
            params={"owner": owner, "from": FROM, "to": TO, "count": "exact", "limit": 4},
        ),
    )
    assert len(page["items"]) == 4 and page["next_cursor"] and page["count"]["value"] == 10
    row = api.get(f"/v1/audit/rows/{page['items'][0]['ref']}")
    assert ok(doc, row, path="/v1/audit/rows/{ref}") == page["items"][0]
    page = ok(
        doc,
        api.get(
            "/v1/audit/search",
            params={
                "owner": owner,
                "from": FROM,
                "to": TO,
                "cursor": page["next_cursor"],
                "limit": 4,
            },
        ),
    )
    assert page["prev_cursor"] and page["items"]
    page = ok(
        doc,
        api.get(
            "/v1/flows/search",
            params={"switch": switch, "from": FROM, "to": TO, "count": "estimate"},
        ),
    )
    assert len(page["items"]) == 5 and {i["ip_version"] for i in page["items"]} == {4, 6}
    removed = next(i["ref"] for i in page["items"] if i["dst_port"] == 80)
    row = ok(doc, api.get(f"/v1/flows/rows/{removed}"), path="/v1/flows/rows/{ref}")
    assert row["dst_port"] == 80
    page = ok(
        doc,
        api.get(
            "/v1/flows/search",
            params={"switch": switch, "from": FROM, "to": TO, "backend": "fdw", "count": "exact"},
        ),
    )
    assert len(page["items"]) == 5

    export = api.get("/v1/audit/export", params={"owner": owner, "from": FROM, "to": TO})
    ok(doc, export)
    assert len(export.content.splitlines()) == 10
    export = api.get("/v1/flows/export", params={"switch": switch, "from": FROM, "to": TO})
    ok(doc, export)
    assert len(export.content.splitlines()) == 5

    removal = {
        "switch": switch,
        "from": FROM[:10],
        "to": TO[:10],
        "flows": [
            {"src_ip": "10.0.0.1", "dst_ip": "10.0.0.2", "src_port": 5, "dst_port": 80, "proto": 6}
        ],
    }
    assert ok(doc, api.request("DELETE", "/v1/flows", json=removal)) == {"removed": 1}
    ok(doc, api.get(f"/v1/flows/rows/{removed}"), 404, path="/v1/flows/rows/{ref}")


def test_write_and_search_errors_answer_as_documented(api, doc) -> None:
    for response in (
        api.post("/v1/audit", content=b"[{", headers={"content-type": "application/json"}),
        api.post("/v1/audit", json=[{"owner": "x"}]),
        api.post("/v1/audit", content=b"a,b", headers={"content-type": "text/csv"}),
        api.post("/v1/flows", content=b"1,2", headers={"content-type": "text/csv"}),
        api.post("/v1/audit", json=[], headers={"Idempotency-Key": "k" * 300}),
        api.get("/v1/audit/search", params={"owner": "x", "from": "yesterday", "to": TO}),
        api.get("/v1/audit/search", params={"owner": "x", "from": FROM, "to": TO, "limit": 0}),
        api.get(
            "/v1/flows/export", params={"switch": "x", "from": FROM, "to": TO, "src_ip": "nope"}
        ),
        api.request(
            "DELETE", "/v1/flows", content=b"\xff", headers={"content-type": "application/json"}
        ),
        api.request("DELETE", "/v1/flows", json={"switch": "x"}),
    ):
        assert response.status_code in (400, 413, 415, 422), response.text
        conforms(doc, response)


def test_health_and_metrics_answer_as_documented(api, doc) -> None:
    assert ok(doc, api.get("/health/live")) == {"status": "live"}
    assert ok(doc, api.get("/health/ready"))["status"] == "ready"
    metrics = api.get("/metrics")
    ok(doc, metrics)
    assert "shardlog_http_requests_total" in metrics.text


def test_admin_answers_as_documented(api, doc, settings) -> None:
    owner = f"oa-ret-{uuid.uuid4().hex[:8]}"
    catalog = ok(doc, api.get("/v1/admin/catalog"))
    group = sorted(s["group"] for s in catalog["shards"] if s["name"].startswith("shard"))[0]
    ok(doc, api.get("/v1/admin/groups"))
    ok(doc, api.get("/v1/admin/shards"))
    mapping = ok(
        doc,
        api.put(
            "/v1/admin/owners",
            json={"kind": "audit", "key": owner, "group": group, "tenant": "system"},
        ),
    )
    assert ok(doc, api.get("/v1/admin/owners", params={"kind": "audit", "key": owner})) == mapping

    new_group = f"oa-{uuid.uuid4().hex[:8]}"
    ok(doc, api.post("/v1/admin/groups", json={"name": new_group}), 201)
    ok(
        doc,
        api.put(f"/v1/admin/groups/{new_group}/replication", json={"synchronous": True}),
        path="/v1/admin/groups/{name}/replication",
    )

    # A day table three days old, a one-day policy of this owner only, and a run of the CLI
    # scoped to the owner: a recorded run with a drop to read back.
    old = {"owner": owner, "ts": (NOW - timedelta(days=3)).isoformat(), "content": "old"}
    ok(doc, api.post("/v1/audit", json=[old, {**old, "ts": NOW.isoformat()}]))
    tables = ok(doc, api.get("/v1/admin/tables", params={"owner": owner, "exact": "true"}))
    assert len(tables["tables"]) == 2
    policy = ok(
        doc,
        api.put(
            "/v1/admin/retention/policies",
            json={"kind": "audit", "group": group, "owner": owner, "keep_days": 1},
        ),
    )
    ok(doc, api.get("/v1/admin/retention/policies"))
    dry = ok(doc, api.post("/v1/admin/retention/run", json={"dry_run": True}))
    assert any(d["owner"] == owner and d["outcome"] == "would_drop" for d in dry["drops"])
    result = run_cli(settings, "retention", "run", "--owner", owner, "--json")
    report = json.loads(result.stdout)
    assert report["tables_dropped"] == 1, result.stdout
    ok(doc, api.get("/v1/admin/retention/runs", params={"limit": 5}))
    run = ok(
        doc,
        api.get(f"/v1/admin/retention/runs/{report['run_id']}"),
        path="/v1/admin/retention/runs/{run_id}",
    )
    assert [d["owner"] for d in run["drops"]] == [owner]
    response = api.delete(f"/v1/admin/retention/policies/{policy['id']}")
    ok_empty = response.status_code == 204 and response.content == b""
    assert ok_empty, response.text


def test_admin_errors_answer_as_documented(api, doc) -> None:
    for response, path in (
        (api.get("/v1/admin/owners", params={"kind": "audit", "key": "oa-never-written"}), None),
        (api.get("/v1/admin/owners", params={"kind": "nope", "key": "x"}), None),
        (api.post("/v1/admin/groups", json={"name": "shard groups"}), None),
        (
            api.post(
                "/v1/admin/groups", content=b"{", headers={"content-type": "application/json"}
            ),
            None,
        ),
        (
            api.put("/v1/admin/groups/no-such-group/replication", json={"synchronous": None}),
            "/v1/admin/groups/{name}/replication",
        ),
        (api.post("/v1/admin/shards/no-such-shard/drain"), "/v1/admin/shards/{name}/drain"),
        (
            api.patch("/v1/admin/shards/no-such-shard", json={"state": "down"}),
            "/v1/admin/shards/{name}",
        ),
        (
            api.put(
                "/v1/admin/owners",
                json={"kind": "audit", "key": "x", "group": "no-such-group", "tenant": "system"},
            ),
            None,
        ),
        (
            api.delete("/v1/admin/retention/policies/987654321"),
            "/v1/admin/retention/policies/{policy_id}",
        ),
        (api.get("/v1/admin/retention/runs/987654321"), "/v1/admin/retention/runs/{run_id}"),
        (api.get("/v1/admin/retention/runs", params={"limit": 0}), None),
    ):
        assert response.status_code in (400, 404, 409, 422), response.text
        conforms(doc, response, path)


# --- regressions found by the fuzz run -----------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "field"),
    [
        # bigint ids: asyncpg could not encode them (500)
        ("DELETE", "/v1/admin/retention/policies/9223372036854775808", "policy_id"),
        ("GET", "/v1/admin/retention/runs/99999999999999999999", "run_id"),
        ("GET", "/v1/admin/retention/runs/0", "run_id"),
        # a NUL in a name reached the metadata database (500)
        ("PUT", "/v1/admin/groups/a%00b/replication", "name"),
        ("PATCH", "/v1/admin/shards/a%00b", "name"),
        ("POST", "/v1/admin/shards/a%00b/drain", "name"),
        ("POST", "/v1/admin/shards/Shard01/drain", "name"),
    ],
)
def test_bad_path_ids_and_names_are_invalid_not_a_bug(api, doc, method, path, field) -> None:
    body = {"PUT": {"synchronous": True}, "PATCH": {"state": "active"}}.get(method)
    response = api.request(method, path, json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field


def test_keep_days_is_bounded(api, doc, settings) -> None:
    # Beyond an integer: the metadata database refused it (500); also for the CLI.
    group = api.get("/v1/admin/shards").json()[0]["group"]
    policy = {"kind": "audit", "group": group, "owner": "oa-long", "keep_days": 99999999999999}
    response = api.put("/v1/admin/retention/policies", json=policy)
    assert response.status_code == 422 and response.json()["error"]["field"] == "keep_days"
    conforms(doc, response)
    cli = run_cli(settings, "retention", "set", "audit", group, "36501", "--owner", "oa-long")
    assert cli.returncode == 2 and "(keep_days): keep_days is at most 36500" in cli.stderr


def test_a_group_name_with_a_final_newline_is_invalid(api, doc) -> None:
    # re.match's "$" matched before the newline; the metadata database's CHECK did not (500).
    response = api.post("/v1/admin/groups", json={"name": "oa-newline\n"})
    assert response.status_code == 422 and response.json()["error"]["field"] == "name"
    conforms(doc, response)


def test_a_retention_run_as_of_year_one_keeps_everything(api, doc) -> None:
    # as_of minus keep_days fell before date.min: an OverflowError (500) once any table was
    # older than today.
    owner = f"oa-y1-{uuid.uuid4().hex[:8]}"
    old = {"owner": owner, "ts": (NOW - timedelta(days=2)).isoformat(), "content": "old"}
    assert api.post("/v1/audit", json=[old]).status_code == 200
    report = ok(
        doc, api.post("/v1/admin/retention/run", json={"dry_run": True, "as_of": "0001-01-01"})
    )
    assert report["drops"] == [] and report["as_of"] == "0001-01-01"


def test_exporters_answer_as_documented(api, doc, default_api) -> None:
    path = "/v1/admin/exporters/{address}"
    address, switch = "2001:db8:4::1", f"oa-ex-{uuid.uuid4().hex[:8]}"
    mapping = ok(doc, api.put(f"/v1/admin/exporters/{address}", json={"switch": switch}), path=path)
    ok(
        doc,
        api.put(f"/v1/admin/exporters/{address}", json={"switch": switch, "domain": 3}),
        path=path,
    )
    assert mapping in ok(doc, api.get("/v1/admin/exporters", params={"tenant": "system"}))
    for removal in (
        api.delete(f"/v1/admin/exporters/{address}", params={"domain": 3}),
        api.delete(f"/v1/admin/exporters/{address}"),
    ):
        assert removal.status_code == 204, removal.text
        conforms(doc, removal, path)
    claimed = f"oa-ex-claimed-{uuid.uuid4().hex[:8]}"
    flow = {"switch": claimed, "src_ip": "10.0.0.1", "dst_ip": "10.0.0.2", "src_port": 1}
    assert default_api.post("/v1/flows", json=[{**flow, "dst_port": 2, "bytes": 1}]).is_success
    for response, status in (
        (api.delete(f"/v1/admin/exporters/{address}"), 404),
        (api.put(f"/v1/admin/exporters/{address}", json={"switch": claimed}), 409),
        (api.put(f"/v1/admin/exporters/{address}", json={"switch": "x", "tenant": "oa-no"}), 404),
        (api.put("/v1/admin/exporters/not-an-address", json={"switch": "x"}), 422),
        (api.put(f"/v1/admin/exporters/{address}", json={"switch": "x", "domain": -1}), 422),
        (api.delete(f"/v1/admin/exporters/{address}", params={"domain": "x"}), 422),
    ):
        assert response.status_code == status, response.text
        conforms(doc, response, path)
    conforms(doc, api.get("/v1/admin/exporters", params={"tenant": "NO"}))


def test_syslog_senders_answer_as_documented(api, doc) -> None:
    path = "/v1/admin/syslog-senders/{sender}"
    for sender in ("2001:db8:6::/48", "cert:oa-web"):
        mapping = ok(doc, api.put(f"/v1/admin/syslog-senders/{sender}", json={}), path=path)
        assert mapping == {"sender": sender, "tenant": "system"}
        assert mapping in ok(doc, api.get("/v1/admin/syslog-senders", params={"tenant": "system"}))
        removal = api.delete(f"/v1/admin/syslog-senders/{sender}")
        assert removal.status_code == 204, removal.text
        conforms(doc, removal, path)
    for response, status in (
        (api.delete("/v1/admin/syslog-senders/2001:db8:6::/48"), 404),
        (api.put("/v1/admin/syslog-senders/192.0.2.0/24", json={"tenant": "oa-no"}), 404),
        (api.put("/v1/admin/syslog-senders/192.0.2.1/24", json={}), 422),
        (api.put("/v1/admin/syslog-senders/192.0.2.0/24", json={"tenant": "NO"}), 422),
        (api.put("/v1/admin/syslog-senders/192.0.2.0/24", json={"other": 1}), 422),
    ):
        assert response.status_code == status, response.text
        conforms(doc, response, path)
    conforms(doc, api.get("/v1/admin/syslog-senders", params={"tenant": "NO"}))


def test_elasticsearch_answers_as_documented(api, doc, anonymous) -> None:
    bulk = "/{index}/_bulk"
    body = b'{"index":{}}\n{"message":"m","@timestamp":"2026-11-25"}\n{"delete":{"_id":"1"}}\n'
    for response, path in (
        (api.post("/oa-es/_bulk", content=body), bulk),
        (api.put("/oa-es/_bulk", content=body), bulk),
        (api.post("/_bulk", content=b'{"create":{"_index":"oa-es"}}\n{"message":1}\n'), None),
        (api.post("/_bulk", content=b"[]\n"), None),
        (api.post("/_bulk", content=b"{}", headers={"content-encoding": "zstd"}), None),
        (api.post("/_bulk", content=b'{"index":{}}\n' + b"x" * 2_000_000), None),
        (anonymous.post("/_bulk", content=body), None),
        (api.get("/"), None),
        (api.head("/"), None),
        (anonymous.get("/"), None),
        (api.get("/_cat/health"), None),
        (anonymous.get("/_cat/health"), None),
    ):
        conforms(doc, response, path)
        assert response.headers["x-elastic-product"] == "Elasticsearch"


# --- the schema says what the API takes (issue #35, item 18) -------------------------------


def test_every_schema_the_document_refers_to_is_defined(doc) -> None:
    referred = set(re.findall(r'"#/components/schemas/([^"]+)"', json.dumps(doc)))
    assert referred, "no references at all: the pattern is wrong"
    assert referred <= set(doc["components"]["schemas"]), referred - set(
        doc["components"]["schemas"]
    )


# A method each path does not take: the request, and the path as documented.
UNTAKEN_METHODS = {
    "DELETE /v1/admin/groups": "/v1/admin/groups",
    "OPTIONS /v1/admin/tokens": "/v1/admin/tokens",
    "PATCH /v1/flows": "/v1/flows",
    "PUT /v1/admin/tokens/0123456789abcdef": "/v1/admin/tokens/{token_id}",
    "POST /health/live": "/health/live",
}


@pytest.mark.parametrize("request_line", UNTAKEN_METHODS)
def test_a_405_allows_every_method_of_its_path(api, doc, request_line) -> None:
    method, path = request_line.split()
    documented = UNTAKEN_METHODS[request_line]
    response = api.request(method, path)
    assert response.status_code == 405, response.text
    allowed = {m.strip() for m in response.headers["allow"].split(",")}
    methods = {m.upper() for m in doc["paths"][documented]}
    # Starlette answers HEAD wherever GET is answered; OpenAPI lists GET alone.
    assert allowed - {"HEAD"} == methods
    assert ("HEAD" in allowed) == ("GET" in methods)


def request_schema(doc: dict[str, Any], method: str, path: str) -> Draft202012Validator:
    body = doc["paths"][path][method.lower()]["requestBody"]["content"]["application/json"]
    return Draft202012Validator(
        {**body["schema"], "components": doc["components"]},
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )


def removal(body: dict[str, Any] | None = None, flow: dict[str, Any] | None = None) -> dict:
    """A DELETE /v1/flows body of one flow, with ``body``'s fields and ``flow``'s replaced."""
    flow_key = {"src_ip": "10.0.0.1", "dst_ip": "10.0.0.2", "src_port": 1, "dst_port": 2}
    return {
        "switch": "oa-x",
        "from": "2026-01-01",
        "to": "2026-01-02",
        "flows": [{**flow_key, **(flow or {})}],
        **(body or {}),
    }


def query_schema(doc: dict[str, Any], method: str, path: str, name: str) -> Draft202012Validator:
    parameters = doc["paths"][path][method.lower()]["parameters"]
    schema = next(p["schema"] for p in parameters if p["name"] == name)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


@pytest.mark.parametrize(
    ("method", "path", "documented", "body", "field"),
    [
        (
            "PUT",
            "/v1/admin/groups/oa-no-such-group/replication",
            "/v1/admin/groups/{name}/replication",
            {"synchronous": 0},
            "synchronous",
        ),
        (
            "POST",
            "/v1/admin/retention/run",
            "/v1/admin/retention/run",
            {"as_of": 0, "dry_run": True},
            "as_of",
        ),
        (
            "POST",
            "/v1/admin/retention/run",
            "/v1/admin/retention/run",
            {"as_of": "0", "dry_run": True},
            "as_of",
        ),
        ("DELETE", "/v1/flows", "/v1/flows", removal(body={"to": 0}), "to"),
        ("DELETE", "/v1/flows", "/v1/flows", removal(flow={"src_ip": ""}), "flows[0].src_ip"),
        (
            "DELETE",
            "/v1/flows",
            "/v1/flows",
            removal(flow={"src_ip": "::1", "dst_ip": "::2", "src_port": "1"}),
            "flows[0].src_port",
        ),
    ],
)
def test_a_body_the_schema_refuses_is_invalid(api, doc, method, path, documented, body, field):
    assert not request_schema(doc, method, documented).is_valid(body)
    response = api.request(method, path, json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field
    conforms(doc, response, documented)


def test_a_day_in_a_query_is_written_as_a_day(api, doc) -> None:
    for name in ("from", "to"):
        assert not query_schema(doc, "GET", "/v1/admin/tables", name).is_valid("0")
        response = api.get("/v1/admin/tables", params={name: "0"})
        assert response.status_code == 422, response.text
        assert response.json()["error"]["field"] == name
        conforms(doc, response)


def test_what_the_schema_takes_the_router_takes(api, doc) -> None:
    # OTLP's JSON is protobuf's JSON mapping: null is a field's default, so the schema says
    # null; an empty export is written as nothing.
    export = {"resourceLogs": None}
    assert request_schema(doc, "POST", "/v1/logs").is_valid(export)
    ok(doc, api.post("/v1/logs", json=export))
    removal = {
        "switch": f"oa-del-{uuid.uuid4().hex[:8]}",
        "from": FROM[:10],
        "to": TO[:10],
        "flows": [
            {"src_ip": "2001:db8::1", "dst_ip": "2001:db8::2", "src_port": 1.0, "dst_port": 2},
            {"src_ip": "0.0.0.0", "dst_ip": "10.0.0.2", "src_port": 1, "dst_port": 2, "proto": 6},
        ],
    }
    assert request_schema(doc, "DELETE", "/v1/flows").is_valid(removal)
    assert ok(doc, api.request("DELETE", "/v1/flows", json=removal)) == {"removed": 0}
    for value in ("", "10.0.0", "nope", "::g"):
        assert not request_schema(doc, "DELETE", "/v1/flows").is_valid(
            {**removal, "flows": [{**removal["flows"][1], "src_ip": value}]}
        )


def test_a_string_where_otlp_has_a_message_is_refused_not_dropped(api, doc) -> None:
    # json_format took "body": "text" for an empty body: a row with no content, answered 200.
    owner = f"oa-otlp-{uuid.uuid4().hex[:8]}"
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": owner}}]}
    record = {"timeUnixNano": str(int(NOW.timestamp()) * 10**9), "body": "text"}
    export = {"resourceLogs": [{"resource": resource, "scopeLogs": [{"logRecords": [record]}]}]}
    response = api.post("/v1/logs", json=export)
    assert response.status_code == 400, response.text
    assert "logRecords[0].body is not an object" in response.json()["message"]
    conforms(doc, response)
    page = api.get("/v1/audit/search", params={"owner": owner, "from": FROM, "to": TO})
    assert ok(doc, page)["items"] == []


def string_schemas(schema: dict[str, Any]) -> Any:
    if "anyOf" in schema:
        for choice in schema["anyOf"]:
            yield from string_schemas(choice)
    elif schema.get("type") == "array":
        yield from string_schemas(schema.get("items", {}))
    elif schema.get("type") == "string":
        yield schema


NUL_FREE = {"date", "date-time", "ipv4", "ipv6"}


def test_no_query_or_path_parameter_schema_takes_a_nul(doc) -> None:
    # The router answers 422 for any (router.api.params.reject_nul): the schema says so.
    checked = 0
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            for parameter in operation.get("parameters", []):
                if parameter["in"] not in ("query", "path"):
                    continue
                for schema in string_schemas(parameter["schema"]):
                    where = (method, path, parameter["name"], schema)
                    if "pattern" in schema:
                        assert not re.search(schema["pattern"], "a\x00b"), where
                    else:
                        # The formats' grammars (RFC 3339, addresses) hold no NUL.
                        assert "enum" in schema or schema.get("format") in NUL_FREE, where
                    checked += 1
    assert checked > 50
