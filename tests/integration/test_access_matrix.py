"""Every /v1 operation x every kind of caller: no token, a token of another tenant, a token
without the operation's scope, one with exactly that scope, a revoked one and an expired one.

401 for the first and the last two, 403 naming the scope or the key for the middle ones, 2xx
only with the scope; nothing written, claimed or returned across tenants. A search or report
that names no key (or a prefix) answers another tenant's token too, with that tenant's rows
only. The table
of calls must name every guarded operation of the OpenAPI document, so a new route cannot skip
it."""

from __future__ import annotations

import ipaddress
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import httpx
import orjson
import pytest

from router import clock
from router.api.es_bulk import ES_PATHS
from router.app import create_app
from router.auth.middleware import guarded
from router.auth.scopes import (
    ADMIN,
    AUDIT_READ,
    AUDIT_WRITE,
    DATA_SCOPES,
    FLOWS_READ,
    FLOWS_WRITE,
    REPORTS,
    SCOPES,
    TAIL,
)
from router.settings import Settings
from services.cluster import LocalCluster
from tests.support import bearer, clock_now, issue_token, run_cli, window_around


def window() -> dict[str, str]:
    """A search's window as the call is made: every row the module wrote without ``ts`` (the
    router stamps them) lies in it, whatever the hour and however long the session has run
    (the keys are the module's own, so a wider window finds nothing else)."""
    return window_around(clock_now() - timedelta(days=1), clock_now())


CALLERS = ("none", "wrong_tenant", "missing_scope", "right_scope", "revoked", "expired")
FLOW = {"src_ip": "10.9.0.1", "dst_ip": "10.9.0.2", "src_port": 1, "dst_port": 2}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@dataclass
class World:
    """Tenant A with an owner and a switch holding rows, tenant B, and a token per caller."""

    api: httpx.Client  # every scope of the system tenant: the admin side of setup and checks
    reader: httpx.Client  # every data scope of tenant A: its rows
    cluster: LocalCluster
    url: str
    tenant_a: str
    tenant_b: str
    owner: str  # tenant A's audit owner
    switch: str  # tenant A's switch
    marker: str  # in every row of A: must never show in an answer to another caller
    group: str  # a group of the local topology
    shard: str  # a shard of the matrix's own (down or draining; never active)
    neighbour: httpx.Client  # every data scope of tenant C, which has rows of its own
    neighbour_keys: tuple[str, str]  # tenant C's owner and switch (A's stems, other suffixes)
    tokens: dict[str, str] = field(default_factory=dict)  # (caller, admin?) -> token text

    def client(self, caller: str, scope: str) -> httpx.Client:
        headers = {} if caller == "none" else bearer(self.tokens[f"{caller}:{scope}"])
        return httpx.Client(base_url=self.url, timeout=60, headers=headers)

    def audit_rows(self, query: str = "") -> list[str]:
        params = {"owner": self.owner, **window(), "limit": 1000, **({"q": query} if query else {})}
        page = self.reader.get("/v1/audit/search", params=params)
        assert page.status_code == 200, page.text
        return [item["content"] for item in page.json()["items"]]

    def audited(self, caller: str, scope: str) -> int:
        """Rows of the platform's own audit written for this caller's token."""
        token_id = self.tokens[f"{caller}:{scope}"].split("_")[1]
        params = {"owner": "shardlog.admin", **window(), "q": token_id, "limit": 10_000}
        page = self.api.get("/v1/audit/search", params=params)
        assert page.status_code == 200, page.text
        return len(page.json()["items"])

    def flows(self) -> list[dict[str, Any]]:
        page = self.reader.get("/v1/flows/search", params={"switch": self.switch, **window()})
        assert page.status_code == 200, page.text
        return page.json()["items"]


@pytest.fixture(scope="module")
def world(
    api: httpx.Client, router_process, settings: Settings, cluster: LocalCluster
) -> Iterator[World]:
    tenant_a, tenant_b = unique("mx-a"), unique("mx-b")
    marker = unique("secret")
    owner, switch = unique("mx-owner"), unique("mx-edge")
    group = next(s["group"] for s in api.get("/v1/admin/shards").json() if s["name"] == "shard01")
    # A shard of the matrix's own, in a group of its own, marked down at once: never written.
    instance = cluster.instances["shard02"]
    database = unique("mx").replace("-", "_")
    instance.psql("postgres", f"CREATE DATABASE {database}")
    matrix_group, shard = unique("mx-g"), unique("mx-s")
    assert api.post("/v1/admin/groups", json={"name": matrix_group}).status_code == 201
    added = api.post(
        "/v1/admin/shards",
        json={"name": shard, "group": matrix_group, "dsn": instance.spec.dsn(database)},
    )
    assert added.status_code == 201, added.text
    assert api.patch(f"/v1/admin/shards/{shard}", json={"state": "down"}).status_code == 200
    reader = httpx.Client(
        base_url=router_process.url,
        timeout=60,
        headers=bearer(issue_token(settings, tenant_a, DATA_SCOPES)),
    )
    # Tenant C: keys that start like A's, and rows (A's marker never in them).
    neighbour = httpx.Client(
        base_url=router_process.url,
        timeout=60,
        headers=bearer(issue_token(settings, unique("mx-c"), DATA_SCOPES)),
    )
    # Not hex: neither key holds the other.
    neighbour_keys = (f"{owner[:-3]}xyz", f"{switch[:-3]}xyz")
    written = neighbour.post("/v1/audit", json=[{"owner": neighbour_keys[0], "content": "of c"}])
    assert written.status_code == 200, written.text
    flow = {"switch": neighbour_keys[1], **FLOW, "bytes": 7}
    assert neighbour.post("/v1/flows", json=[flow]).status_code == 200
    w = World(
        api,
        reader,
        cluster,
        router_process.url,
        tenant_a,
        tenant_b,
        owner,
        switch,
        marker,
        group,
        shard,
        neighbour,
        neighbour_keys,
    )

    everything = list(DATA_SCOPES)
    for scope in SCOPES:
        admin = scope == ADMIN
        home = "system" if admin else tenant_a
        all_of_home = list(SCOPES) if admin else everything
        # A report needs `reports` and the read scope of its data, a tail `tail` and the read
        # scope (router/auth/dependency.py).
        granted = [scope, AUDIT_READ, FLOWS_READ] if scope in (REPORTS, TAIL) else [scope]
        w.tokens[f"right_scope:{scope}"] = issue_token(settings, home, granted)
        w.tokens[f"missing_scope:{scope}"] = issue_token(
            settings, home, [s for s in all_of_home if s != scope]
        )
        w.tokens[f"wrong_tenant:{scope}"] = issue_token(settings, tenant_b, everything)
        w.tokens[f"expired:{scope}"] = issue_token(
            settings, home, all_of_home, expires_at=clock_now() - timedelta(seconds=1)
        )
        revoked = issue_token(settings, home, all_of_home)
        w.tokens[f"revoked:{scope}"] = revoked
        token_id = revoked.split("_")[1]
        assert api.delete(f"/v1/admin/tokens/{token_id}").status_code == 200

    # Tenant A's rows.
    with w.client("right_scope", AUDIT_WRITE) as writer:
        body = [{"owner": owner, "content": f"{marker} row {i}"} for i in range(3)]
        assert writer.post("/v1/audit", json=body).status_code == 200
    with w.client("right_scope", FLOWS_WRITE) as writer:
        flow = {"switch": switch, **FLOW, "bytes": 100}
        assert writer.post("/v1/flows", json=[flow]).status_code == 200
    # A recorded retention run to read back (scoped to a key of nobody's: it drops nothing).
    ran = run_cli(settings, "retention", "run", "--owner", unique("nobody"), "--json")
    assert ran.returncode == 0, ran.stderr
    with reader:
        try:
            yield w
        finally:
            neighbour.close()


@dataclass
class Call:
    """One operation: how to call it (``make`` may prepare a target per call, so that every
    caller has something to change), the scope it needs, whether a foreign key is what the
    wrong tenant's token meets (else: the scope), and what must hold afterwards."""

    method: str
    path: str
    scope: str
    make: Callable[[World, str], dict[str, Any]]
    key_field: str | None = None
    status: int = 200
    after: Callable[[World, str, httpx.Response], None] | None = None
    # A search naming no key, or a prefix: the wrong tenant's token is answered too, with its
    # own tenant's rows (none of A's).
    answers_any_tenant: bool = False
    # Any valid token, no scope (GET /v1/whoami): every token is answered, about itself only.
    any_token: bool = False


def own_identity(w: World, caller: str, response: httpx.Response) -> None:
    """whoami tells a token about itself: its own tenant and scopes, nothing of another's."""
    if response.status_code != 200:
        return
    identity = response.json()
    assert identity["tenant"] == (w.tenant_b if caller == "wrong_tenant" else w.tenant_a)
    assert identity["token_id"] == w.tokens[f"{caller}:{AUDIT_READ}"].split("_")[1]
    assert (AUDIT_READ in identity["scopes"]) == (caller != "missing_scope")
    assert identity["any_tenant"] is False


def plain(**request: Any) -> Callable[[World, str], dict[str, Any]]:
    return lambda _w, _caller: request


def audit_write(w: World, caller: str) -> dict[str, Any]:
    line = orjson.dumps({"owner": w.owner, "content": f"written by {caller}"}) + b"\n"
    return {"content": line, "headers": {"content-type": "application/x-ndjson"}}


def audit_written(w: World, caller: str, response: httpx.Response) -> None:
    found = w.audit_rows(f"written by {caller}")
    assert found == ([f"written by {caller}"] if caller == "right_scope" else []), found


def loki_push(w: World, caller: str) -> dict[str, Any]:
    # Written now, after tenant A's first rows (which searches and tails find first).
    value = [str(int(clock.time() * 10**9)), f"pushed to loki by {caller}"]
    return {"json": {"streams": [{"stream": {"owner": w.owner}, "values": [value]}]}}


def otlp_logs(w: World, caller: str) -> dict[str, Any]:
    owner = {"key": "service.name", "value": {"stringValue": w.owner}}
    record = {"body": {"stringValue": f"exported as otlp by {caller}"}}
    resource_logs = {"resource": {"attributes": [owner]}, "scopeLogs": [{"logRecords": [record]}]}
    return {"json": {"resourceLogs": [resource_logs]}}


def shipped_by(phrase: str) -> Callable[[World, str, httpx.Response], None]:
    def check(w: World, caller: str, response: httpx.Response) -> None:
        found = w.audit_rows(f"{phrase} {caller}")
        assert found == ([f"{phrase} {caller}"] if caller == "right_scope" else []), found
        if caller == "right_scope" and phrase.startswith("exported"):
            assert response.json() == {}  # every record taken: no partial success

    return check


def es_bulk_call(method: str, path: str, label: str) -> Call:
    """Elasticsearch's bulk API: tenant A's owner named by the document (or by the path's
    index); a foreign owner is that item's 403 in a 200 answer, and nothing of it is written."""

    def make(w: World, caller: str) -> dict[str, Any]:
        document = {"message": f"{label} by {caller}"}
        if "{index}" not in path:
            document["owner"] = w.owner
        body = orjson.dumps({"create": {}}) + b"\n" + orjson.dumps(document) + b"\n"
        headers = {"content-type": "application/x-ndjson"}
        return {"path": {"index": w.owner}, "content": body, "headers": headers}

    def after(w: World, caller: str, response: httpx.Response) -> None:
        found = w.audit_rows(f"{label} by {caller}")
        assert found == ([f"{label} by {caller}"] if caller == "right_scope" else []), found

    return Call(method, path, AUDIT_WRITE, make, "items[0].owner", after=after)


def es_handshake(method: str, path: str) -> Call:
    """Answered to any token with audit:write (nothing of a tenant in it)."""
    return Call(method, path, AUDIT_WRITE, plain(), answers_any_tenant=True)


ES_WRITES = {
    "es bulk": es_bulk_call("POST", "/_bulk", "esbulk1"),
    "es bulk, put": es_bulk_call("PUT", "/_bulk", "esbulk2"),
    "es bulk into an index": es_bulk_call("POST", "/{index}/_bulk", "esbulk3"),
    "es bulk into an index, put": es_bulk_call("PUT", "/{index}/_bulk", "esbulk4"),
}


def flows_write(w: World, caller: str) -> dict[str, Any]:
    port = 1000 + CALLERS.index(caller)
    csv = f"10.9.0.1,10.9.0.2,{port},2\n".encode()
    return {
        "params": {"switch": w.switch},
        "content": csv,
        "headers": {"content-type": "text/csv"},
    }


def flows_written(w: World, caller: str, response: httpx.Response) -> None:
    port = 1000 + CALLERS.index(caller)
    found = [f for f in w.flows() if f["src_port"] == port]
    assert len(found) == (1 if caller == "right_scope" else 0), found


def flows_delete(w: World, caller: str) -> dict[str, Any]:
    port = 2000 + CALLERS.index(caller)
    with w.client("right_scope", FLOWS_WRITE) as writer:
        flow = {"switch": w.switch, **FLOW, "src_port": port, "bytes": 1}
        assert writer.post("/v1/flows", json=[flow]).status_code == 200
    deleted = {**FLOW, "src_port": port}
    # The router stamped the flow with its day: the days either side of ours cover it even if
    # a midnight passed meanwhile.
    now = clock_now()
    days = {"from": (now - timedelta(days=1)).date().isoformat()}
    days["to"] = (now + timedelta(days=1)).date().isoformat()
    return {"json": {"switch": w.switch, **days, "flows": [deleted]}}


def flows_deleted(w: World, caller: str, response: httpx.Response) -> None:
    port = 2000 + CALLERS.index(caller)
    left = [f for f in w.flows() if f["src_port"] == port]
    assert len(left) == (0 if caller == "right_scope" else 1), left
    if caller == "right_scope":
        assert response.json() == {"removed": 1}


def audit_found(w: World, caller: str, response: httpx.Response) -> None:
    if caller == "right_scope":
        assert w.marker in response.text


def flows_found(w: World, caller: str, response: httpx.Response) -> None:
    """A's switch shows only to A's token; C's, which starts like it, never."""
    assert (w.switch in response.text) == (caller == "right_scope"), response.text
    assert w.neighbour_keys[1] not in response.text


def audit_found_alone(w: World, caller: str, response: httpx.Response) -> None:
    audit_found(w, caller, response)
    assert w.neighbour_keys[0] not in response.text


def several(field: str, key: Callable[[World], str]) -> Callable[[World, str], dict[str, Any]]:
    """A's key and one nobody has."""
    return lambda w, _c: {"params": {field: [key(w), unique("mx-nobody")], **window()}}


def read(
    path: str, make: Callable[[World, str], dict[str, Any]], key_field: str | None = None
) -> Call:
    """A search or an export. Naming a key of A's: the wrong tenant meets it (403). Naming
    none, or a prefix: every tenant's token is answered, with its own tenant's rows."""
    audit = path.startswith("/v1/audit/")
    if key_field is not None:
        after = audit_found if audit else None
    else:
        after = audit_found_alone if audit else flows_found
    return Call(
        "GET",
        path,
        AUDIT_READ if audit else FLOWS_READ,
        make,
        key_field,
        after=after,
        answers_any_tenant=key_field is None,
    )


def audit_row(w: World, _caller: str) -> dict[str, Any]:
    params = {"owner": w.owner, **window(), "limit": 1}
    [item] = w.reader.get("/v1/audit/search", params=params).json()["items"]
    return {"path": {"ref": item["ref"]}}


def flow_row(w: World, _caller: str) -> dict[str, Any]:
    return {"path": {"ref": w.flows()[0]["ref"]}}


def new_group(w: World, _caller: str) -> dict[str, Any]:
    name = unique("mx-g")
    assert w.api.post("/v1/admin/groups", json={"name": name}).status_code == 201
    return {"path": {"name": name}, "json": {"synchronous": True}}


def new_database_shard(w: World, _caller: str) -> dict[str, Any]:
    """A fresh database for every caller, to be a shard of the matrix's group."""
    instance = w.cluster.instances["shard02"]
    database = unique("mx").replace("-", "_")
    instance.psql("postgres", f"CREATE DATABASE {database}")
    shards = {s["name"]: s["group"] for s in w.api.get("/v1/admin/shards").json()}
    dsn = instance.spec.dsn(database)
    return {"json": {"name": unique("mx-s"), "group": shards[w.shard], "dsn": dsn}}


def new_shard_down(w: World, caller: str, response: httpx.Response) -> None:
    """The shard made with the scope is marked down at once: it never takes a row."""
    name = orjson.loads(response.request.content)["name"]
    marked = w.api.patch(f"/v1/admin/shards/{name}", json={"state": "down"})
    assert marked.status_code == (200 if caller == "right_scope" else 404)


def new_tenant(w: World, _caller: str) -> dict[str, Any]:
    name = unique("mx-t")
    assert w.api.post("/v1/admin/tenants", json={"name": name}).status_code == 201
    return {"path": {"name": name}}


def new_token(w: World, _caller: str) -> dict[str, Any]:
    made = w.api.post(
        "/v1/admin/tokens", json={"tenant": w.tenant_a, "name": "victim", "scopes": [AUDIT_READ]}
    )
    return {"path": {"token_id": made.json()["id"]}}


def new_policy(w: World, _caller: str) -> dict[str, Any]:
    body = {"kind": "audit", "group": w.group, "owner": unique("mx-p"), "keep_days": 30}
    made = w.api.put("/v1/admin/retention/policies", json=body)
    return {"path": {"policy_id": made.json()["id"]}}


def a_run(w: World, _caller: str) -> dict[str, Any]:
    runs = w.api.get("/v1/admin/retention/runs", params={"limit": 1}).json()
    return {"path": {"run_id": runs[0]["id"]}}


def a_token(w: World, _caller: str) -> dict[str, Any]:
    return {"path": {"token_id": w.tokens["right_scope:audit:read"].split("_")[1]}}


def an_exporter(_caller: str) -> str:
    """An exporter address of the matrix's own for each call, spelt as the catalog spells it."""
    return str(ipaddress.IPv6Address(f"2001:db8:3::{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}"))


def exporter_of(w: World, address: str) -> list[dict[str, Any]]:
    return [m for m in w.api.get("/v1/admin/exporters").json() if m["address"] == address]


def map_exporter(w: World, caller: str) -> dict[str, Any]:
    """Tenant A's switch: the mapping the right token makes, and no other."""
    address = an_exporter(caller)
    return {"path": {"address": address}, "json": {"switch": w.switch, "tenant": w.tenant_a}}


def exporter_mapped(w: World, caller: str, response: httpx.Response) -> None:
    address = response.request.url.path.rsplit("/", 1)[1]
    expected = [{"address": address, "domain": None, "switch": w.switch, "tenant": w.tenant_a}]
    assert exporter_of(w, address) == (expected if caller == "right_scope" else [])


def new_exporter(w: World, caller: str) -> dict[str, Any]:
    address = an_exporter(caller)
    body = {"switch": w.switch, "tenant": w.tenant_a}
    assert w.api.put(f"/v1/admin/exporters/{address}", json=body).status_code == 200
    return {"path": {"address": address}}


def exporter_survives(w: World, caller: str, response: httpx.Response) -> None:
    address = response.request.url.path.rsplit("/", 1)[1]
    assert len(exporter_of(w, address)) == (0 if caller == "right_scope" else 1)


def a_syslog_network(_caller: str) -> str:
    """A network of the matrix's own for each call, spelt as the catalog spells it."""
    return str(ipaddress.ip_network(f"2001:db8:5:{uuid.uuid4().hex[:4]}::/64"))


def syslog_sender_of(w: World, sender: str) -> list[dict[str, Any]]:
    return [m for m in w.api.get("/v1/admin/syslog-senders").json() if m["sender"] == sender]


def map_syslog_sender(w: World, caller: str) -> dict[str, Any]:
    """Tenant A's: the mapping the right token makes, and no other."""
    return {"path": {"sender": a_syslog_network(caller)}, "json": {"tenant": w.tenant_a}}


def syslog_sender_mapped(w: World, caller: str, response: httpx.Response) -> None:
    sender = response.request.url.path.removeprefix("/v1/admin/syslog-senders/")
    expected = [{"sender": sender, "tenant": w.tenant_a}]
    assert syslog_sender_of(w, sender) == (expected if caller == "right_scope" else [])


def new_syslog_sender(w: World, caller: str) -> dict[str, Any]:
    sender = a_syslog_network(caller)
    mapped = w.api.put(f"/v1/admin/syslog-senders/{sender}", json={"tenant": w.tenant_a})
    assert mapped.status_code == 200, mapped.text
    return {"path": {"sender": sender}}


def syslog_sender_survives(w: World, caller: str, response: httpx.Response) -> None:
    sender = response.request.url.path.removeprefix("/v1/admin/syslog-senders/")
    assert len(syslog_sender_of(w, sender)) == (0 if caller == "right_scope" else 1)


def tenant_survives(w: World, caller: str, response: httpx.Response) -> None:
    names = {t["name"] for t in w.api.get("/v1/admin/tenants").json()}
    assert (response.request.url.path.rsplit("/", 1)[1] in names) == (caller != "right_scope")


def token_survives(w: World, caller: str, response: httpx.Response) -> None:
    token_id = response.request.url.path.rsplit("/", 1)[1]
    state = w.api.get(f"/v1/admin/tokens/{token_id}").json()["state"]
    assert state == ("revoked" if caller == "right_scope" else "active")


def shard_state(state: str) -> Callable[[World, str, httpx.Response], None]:
    def check(w: World, caller: str, _response: httpx.Response) -> None:
        shards = {s["name"]: s["state"] for s in w.api.get("/v1/admin/shards").json()}
        assert shards[w.shard] == (state if caller == "right_scope" else "down")
        # Back to down: the matrix's shard never takes rows.
        w.api.patch(f"/v1/admin/shards/{w.shard}", json={"state": "down"})

    return check


def unclaimed(w: World, caller: str, response: httpx.Response) -> None:
    key = orjson.loads(response.request.content)["key"]
    found = w.api.get("/v1/admin/owners", params={"kind": "audit", "key": key})
    assert found.status_code == (200 if caller == "right_scope" else 404)


def reported(caller: str, response: httpx.Response, rows: int) -> None:
    """The right token sees tenant A's rows (at least those written at set-up: other calls of
    the matrix add some)."""
    if caller == "right_scope":
        [total] = response.json()["groups"]
        assert total["rows"] >= rows


def reported_alone(field: str) -> Callable[[World, str, httpx.Response], None]:
    """A report by prefix or without keys, grouped by ``field``: the right token's groups are
    tenant A's key alone, the wrong tenant's (B has no rows) none; C's key, which starts like
    A's, never shows."""
    index = 0 if field == "owner" else 1

    def check(w: World, caller: str, response: httpx.Response) -> None:
        assert w.neighbour_keys[index] not in response.text
        mine = w.owner if field == "owner" else w.switch
        if caller in ("right_scope", "wrong_tenant"):
            keys = {group[field] for group in response.json()["groups"]}
            assert keys == ({mine} if caller == "right_scope" else set()), keys

    return check


def report_call(kind: str, field: str, narrowing: Callable[[World], dict[str, str]]) -> Call:
    """A report naming no key, or a prefix: every tenant's token is answered, with its own
    tenant's groups."""

    def make(w: World, _caller: str) -> dict[str, Any]:
        return {"params": {**narrowing(w), **window(), "group_by": field}}

    return Call(
        "GET",
        f"/v1/{kind}/report",
        REPORTS,
        make,
        after=reported_alone(field),
        answers_any_tenant=True,
    )


def tailed(rows: int) -> Callable[[World, str, httpx.Response], None]:
    """The right token's stream replays tenant A's rows and ends after ``rows`` of them."""

    def check(w: World, caller: str, response: httpx.Response) -> None:
        if caller == "right_scope":
            assert response.headers["content-type"].startswith("text/event-stream")
            data = [line for line in response.text.splitlines() if line.startswith("data: {")]
            assert len(data) == rows + 1  # the subscribed event, then the rows
            if rows == 3:
                assert all(w.marker in line for line in data[1:])

    return check


def tail_call(kind: str, key: str, rows: int) -> Call:
    """A tail of tenant A's key that replays its rows from the window's start and ends after
    ``rows`` of them."""

    def make(w: World, _caller: str) -> dict[str, Any]:
        return {"params": {key: getattr(w, key), "from": window()["from"], "limit": rows}}

    return Call("GET", f"/v1/{kind}/tail", TAIL, make, key, after=tailed(rows))


CALLS: dict[str, Call] = {
    "write audit": Call(
        "POST", "/v1/audit", AUDIT_WRITE, audit_write, "records[0].owner", after=audit_written
    ),
    "write flows": Call(
        "POST", "/v1/flows", FLOWS_WRITE, flows_write, "lines[1].switch", after=flows_written
    ),
    "loki push": Call(
        "POST",
        "/loki/api/v1/push",
        AUDIT_WRITE,
        loki_push,
        "streams[0].owner",
        status=204,
        after=shipped_by("pushed to loki by"),
    ),
    "otlp logs": Call(
        "POST",
        "/v1/logs",
        AUDIT_WRITE,
        otlp_logs,
        "resourceLogs[0].owner",
        after=shipped_by("exported as otlp by"),
    ),
    "delete flows": Call(
        "DELETE", "/v1/flows", FLOWS_WRITE, flows_delete, "switch", after=flows_deleted
    ),
    "search audit": read(
        "/v1/audit/search", lambda w, _c: {"params": {"owner": w.owner, **window()}}, "owner"
    ),
    "export audit": read(
        "/v1/audit/export", lambda w, _c: {"params": {"owner": w.owner, **window()}}, "owner"
    ),
    "search flows": read(
        "/v1/flows/search", lambda w, _c: {"params": {"switch": w.switch, **window()}}, "switch"
    ),
    "export flows": read(
        "/v1/flows/export", lambda w, _c: {"params": {"switch": w.switch, **window()}}, "switch"
    ),
    "search audit, several owners": read(
        "/v1/audit/search", several("owner", lambda w: w.owner), "owner"
    ),
    "search audit, every owner": read("/v1/audit/search", lambda _w, _c: {"params": window()}),
    "export audit, an owner prefix": read(
        "/v1/audit/export",
        lambda w, _c: {"params": {"owner_prefix": w.owner[:-3], **window()}},
    ),
    "search flows, several switches": read(
        "/v1/flows/search", several("switch", lambda w: w.switch), "switch"
    ),
    "search flows, every switch": read("/v1/flows/search", lambda _w, _c: {"params": window()}),
    "search flows, a switch prefix": read(
        "/v1/flows/search",
        lambda w, _c: {"params": {"switch_prefix": w.switch[:-3], **window()}},
    ),
    "export flows, every switch": read("/v1/flows/export", lambda _w, _c: {"params": window()}),
    "audit row": Call(
        "GET", "/v1/audit/rows/{ref}", AUDIT_READ, audit_row, "ref", after=audit_found
    ),
    "flow row": Call("GET", "/v1/flows/rows/{ref}", FLOWS_READ, flow_row, "ref"),
    "report audit": Call(
        "GET",
        "/v1/audit/report",
        REPORTS,
        lambda w, _c: {"params": {"owner": w.owner, **window()}},
        "owner",
        after=lambda w, c, r: reported(c, r, 3),
    ),
    "report flows": Call(
        "GET",
        "/v1/flows/report",
        REPORTS,
        lambda w, _c: {"params": {"switch": w.switch, **window(), "metrics": "rows"}},
        "switch",
        after=lambda w, c, r: reported(c, r, 1),
    ),
    "report audit, every owner": report_call("audit", "owner", lambda _w: {}),
    "report audit, an owner prefix": report_call(
        "audit", "owner", lambda w: {"owner_prefix": w.owner[:-3]}
    ),
    "report flows, every switch": report_call("flows", "switch", lambda _w: {}),
    "report flows, a switch prefix": report_call(
        "flows", "switch", lambda w: {"switch_prefix": w.switch[:-3]}
    ),
    "tail audit": tail_call("audit", "owner", 3),
    "tail flows": tail_call("flows", "switch", 1),
    "catalog": Call("GET", "/v1/admin/catalog", ADMIN, plain()),
    "list groups": Call("GET", "/v1/admin/groups", ADMIN, plain()),
    "add group": Call(
        "POST",
        "/v1/admin/groups",
        ADMIN,
        lambda _w, _c: {"json": {"name": unique("mx-g")}},
        status=201,
    ),
    "group replication": Call("PUT", "/v1/admin/groups/{name}/replication", ADMIN, new_group),
    "remove group": Call("DELETE", "/v1/admin/groups/{name}", ADMIN, new_group, status=204),
    "list shards": Call("GET", "/v1/admin/shards", ADMIN, plain()),
    "add shard": Call(
        "POST", "/v1/admin/shards", ADMIN, new_database_shard, status=201, after=new_shard_down
    ),
    "shard state": Call(
        "PATCH",
        "/v1/admin/shards/{name}",
        ADMIN,
        lambda w, _c: {"path": {"name": w.shard}, "json": {"state": "draining"}},
        after=shard_state("draining"),
    ),
    "drain shard": Call(
        "POST",
        "/v1/admin/shards/{name}/drain",
        ADMIN,
        lambda w, _c: {"path": {"name": w.shard}},
        after=shard_state("draining"),
    ),
    "get owner": Call(
        "GET",
        "/v1/admin/owners",
        ADMIN,
        lambda w, _c: {"params": {"kind": "audit", "key": w.owner}},
    ),
    "map owner": Call(
        "PUT",
        "/v1/admin/owners",
        ADMIN,
        lambda w, _c: {
            "json": {"kind": "audit", "key": unique("mx-m"), "group": w.group, "tenant": w.tenant_a}
        },
        after=unclaimed,
    ),
    "promote owner": Call(
        "POST",
        "/v1/admin/owners/promote",
        ADMIN,
        lambda w, _c: {"json": {"kind": "audit", "key": w.owner}},
    ),
    "sharing": Call("GET", "/v1/admin/sharing", ADMIN, plain()),
    "tables": Call("GET", "/v1/admin/tables", ADMIN, lambda w, _c: {"params": {"owner": w.owner}}),
    "compaction": Call(
        "GET", "/v1/admin/compaction", ADMIN, lambda w, _c: {"params": {"owner": w.owner}}
    ),
    "policies": Call("GET", "/v1/admin/retention/policies", ADMIN, plain()),
    "set policy": Call(
        "PUT",
        "/v1/admin/retention/policies",
        ADMIN,
        lambda w, _c: {
            "json": {"kind": "audit", "group": w.group, "owner": unique("mx-p"), "keep_days": 30}
        },
    ),
    "remove policy": Call(
        "DELETE", "/v1/admin/retention/policies/{policy_id}", ADMIN, new_policy, status=204
    ),
    "run retention": Call("POST", "/v1/admin/retention/run", ADMIN, plain(json={"dry_run": True})),
    "retention runs": Call("GET", "/v1/admin/retention/runs", ADMIN, plain()),
    "retention run": Call("GET", "/v1/admin/retention/runs/{run_id}", ADMIN, a_run),
    "list tenants": Call("GET", "/v1/admin/tenants", ADMIN, plain()),
    "add tenant": Call(
        "POST",
        "/v1/admin/tenants",
        ADMIN,
        lambda _w, _c: {"json": {"name": unique("mx-t")}},
        status=201,
    ),
    "remove tenant": Call(
        "DELETE", "/v1/admin/tenants/{name}", ADMIN, new_tenant, status=204, after=tenant_survives
    ),
    "create token": Call(
        "POST",
        "/v1/admin/tokens",
        ADMIN,
        lambda w, _c: {"json": {"tenant": w.tenant_a, "name": "made", "scopes": [AUDIT_READ]}},
        status=201,
    ),
    "list tokens": Call("GET", "/v1/admin/tokens", ADMIN, plain()),
    "get token": Call("GET", "/v1/admin/tokens/{token_id}", ADMIN, a_token),
    "revoke token": Call(
        "DELETE", "/v1/admin/tokens/{token_id}", ADMIN, new_token, after=token_survives
    ),
    "list exporters": Call("GET", "/v1/admin/exporters", ADMIN, plain()),
    "map exporter": Call(
        "PUT", "/v1/admin/exporters/{address}", ADMIN, map_exporter, after=exporter_mapped
    ),
    "remove exporter": Call(
        "DELETE",
        "/v1/admin/exporters/{address}",
        ADMIN,
        new_exporter,
        status=204,
        after=exporter_survives,
    ),
    "list syslog senders": Call("GET", "/v1/admin/syslog-senders", ADMIN, plain()),
    "map syslog sender": Call(
        "PUT",
        "/v1/admin/syslog-senders/{sender}",
        ADMIN,
        map_syslog_sender,
        after=syslog_sender_mapped,
    ),
    "remove syslog sender": Call(
        "DELETE",
        "/v1/admin/syslog-senders/{sender}",
        ADMIN,
        new_syslog_sender,
        status=204,
        after=syslog_sender_survives,
    ),
    "whoami": Call("GET", "/v1/whoami", AUDIT_READ, plain(), any_token=True, after=own_identity),
    **ES_WRITES,
    "es info": es_handshake("GET", "/"),
    "es ping": es_handshake("HEAD", "/"),
    "es health": es_handshake("GET", "/_cat/health"),
}


# What changes something, and is therefore written to the platform's own audit.
AUDITED = {
    name
    for name, call in CALLS.items()
    if call.method not in ("GET", "HEAD")
    and name
    not in ("write audit", "write flows", "run retention", "loki push", "otlp logs", *ES_WRITES)
}


def test_the_matrix_names_every_guarded_operation() -> None:
    operations = {
        (method.upper(), path)
        for path, item in create_app(Settings()).openapi()["paths"].items()
        for method in item
        if guarded(path)
    }
    assert operations == {(c.method, c.path) for c in CALLS.values()}


@pytest.mark.parametrize("caller", CALLERS)
@pytest.mark.parametrize("name", list(CALLS))
def test_access(world: World, name: str, caller: str) -> None:
    call = CALLS[name]
    request = call.make(world, caller)
    path = call.path.format(**request.pop("path", {}))
    audited = world.audited("right_scope", call.scope) if caller == "right_scope" else 0
    with world.client(caller, call.scope) as client:
        response = client.request(call.method, path, **request)
    es = call.path in ES_PATHS
    if caller in ("none", "revoked", "expired"):
        assert response.status_code == 401, response.text
        assert response.headers["www-authenticate"].startswith("Bearer")
        message = refusal(response, es, "unauthorized", "security_exception", "authorization")
        if caller != "none" and message is not None:
            assert ("revoked" if caller == "revoked" else "expired") in message
    elif caller == "right_scope":
        assert response.status_code == call.status, response.text
        # Admin actions and deletions leave exactly one row in the platform's own audit.
        expected = audited + (1 if name in AUDITED else 0)
        assert world.audited("right_scope", call.scope) == expected, name
    elif call.any_token or (caller == "wrong_tenant" and call.answers_any_tenant):
        assert response.status_code == call.status, response.text
    elif es and caller == "wrong_tenant" and call.key_field is not None:
        # Elasticsearch's bulk API answers each item: the foreign owner's is a 403.
        assert response.status_code == 200, response.text
        [item] = [next(iter(entry.values())) for entry in response.json()["items"]]
        assert item["status"] == 403 and item["error"]["type"] == "security_exception"
        assert "belongs to another tenant" in item["error"]["reason"]
        assert item["error"]["reason"].startswith(call.key_field.split(".")[0])
    else:
        assert response.status_code == 403, response.text
        if caller == "wrong_tenant" and call.key_field is not None:
            message = refusal(response, es, "forbidden", "security_exception", call.key_field)
            assert message is not None and "belongs to another tenant" in message
        else:
            message = refusal(response, es, "forbidden", "security_exception", "authorization")
            assert message is None or repr(call.scope) in message
    if caller != "right_scope":
        assert world.marker not in response.text
        assert world.owner not in response.text or call.key_field is not None
        assert world.switch not in response.text or call.key_field is not None
    if call.after is not None:
        call.after(world, caller, response)


def refusal(response: httpx.Response, es: bool, code: str, es_type: str, field: str) -> str | None:
    """The message of a refusal in the path's error form (None: a HEAD, which has no body)."""
    if response.request.method == "HEAD":
        assert response.content == b""
        return None
    body = response.json()
    if es:
        assert body["status"] == response.status_code and body["error"]["type"] == es_type
        return str(body["error"]["reason"])
    error = body["error"]
    assert error["code"] == code and error["field"] == field, error
    return str(error["message"])


def test_nothing_of_tenant_a_changed_but_by_its_own_tokens(world: World) -> None:
    rows = world.audit_rows()
    es_rows = [f"{label} by right_scope" for label in ("esbulk1", "esbulk2", "esbulk3", "esbulk4")]
    assert sorted(rows) == sorted(
        [f"{world.marker} row {i}" for i in range(3)]
        + ["written by right_scope", "pushed to loki by right_scope"]
        + ["exported as otlp by right_scope", *es_rows]
    )
    ports = sorted(f["src_port"] for f in world.flows())
    # The first flow, the one written with the scope, and those the refused deletes left.
    refused_deletes = [2000 + CALLERS.index(c) for c in CALLERS if c != "right_scope"]
    assert ports == sorted([1, 1000 + CALLERS.index("right_scope"), *refused_deletes])
    owners = world.api.get("/v1/admin/owners", params={"kind": "audit", "key": world.owner})
    assert owners.json()["tenant"] == world.tenant_a
    tenants = {t["name"]: t for t in world.api.get("/v1/admin/tenants").json()}
    assert tenants[world.tenant_b]["owners"] == 0  # B claimed nothing


def test_a_search_naming_no_key_covers_its_own_tenant_only(world: World) -> None:
    """Tenants A and C both have rows, under keys that start alike: without a key, or with
    their common prefix, each token finds (and reports on) its own tenant's keys and rows,
    never the other's."""
    a_keys = (world.owner, world.switch)
    for client, mine, theirs in (
        (world.reader, a_keys, world.neighbour_keys),
        (world.neighbour, world.neighbour_keys, a_keys),
    ):
        for path, name, index in (
            ("/v1/audit/search", "owner", 0),
            ("/v1/flows/search", "switch", 1),
        ):
            for narrowing in ({}, {f"{name}_prefix": a_keys[index][:-3]}):
                page = client.get(path, params={**window(), **narrowing, "limit": 1000})
                assert page.status_code == 200, page.text
                assert {item[name] for item in page.json()["items"]} == {mine[index]}
                assert theirs[index] not in page.text
                assert (world.marker in page.text) == (client is world.reader and index == 0)
                report_path = path.replace("/search", "/report")
                report = client.get(report_path, params={**window(), **narrowing, "group_by": name})
                assert report.status_code == 200, report.text
                assert {group[name] for group in report.json()["groups"]} == {mine[index]}
                assert theirs[index] not in report.text


@pytest.mark.parametrize(
    ("path", "key", "read", "scope"),
    [
        ("/v1/audit/report", "owner", AUDIT_READ, REPORTS),
        ("/v1/flows/report", "switch", FLOWS_READ, REPORTS),
        ("/v1/audit/tail", "owner", AUDIT_READ, TAIL),
        ("/v1/flows/tail", "switch", FLOWS_READ, TAIL),
    ],
)
def test_a_report_or_tail_also_needs_the_read_scope(
    world: World, settings: Settings, path, key, read, scope
) -> None:
    token = issue_token(settings, world.tenant_a, [scope])
    params = {key: world.owner if key == "owner" else world.switch, **window()}
    with httpx.Client(base_url=world.url, timeout=60, headers=bearer(token)) as client:
        response = client.get(path, params=params)
    assert response.status_code == 403, response.text
    assert repr(read) in response.json()["error"]["message"]
    assert world.marker not in response.text
