"""Tenants, tokens and key ownership against the session router: the admin API and CLI, the
local cluster's bootstrap tokens, writes and searches across tenants, open mode."""

from __future__ import annotations

import asyncio
import socket
import stat
import time
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta

import httpx
import orjson
import pytest
from fastapi.testclient import TestClient

from bench.shard_view import owner_id
from router.app import create_app
from router.auth import bootstrap
from router.auth.scopes import DATA_SCOPES
from router.settings import AuthSettings, Settings
from services.process import free_port
from services.router_process import RouterProcess
from tests.support import (
    bearer,
    clock_now,
    eventually,
    issue_token,
    recent_window,
    run_cli,
    running_router,
    settings_env,
)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def client_for(router_url: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=router_url, timeout=30, headers=bearer(token))


def ndjson(records: list[dict]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def post_audit(client: httpx.Client, records: list[dict]) -> httpx.Response:
    return client.post(
        "/v1/audit", content=ndjson(records), headers={"content-type": "application/x-ndjson"}
    )


@pytest.fixture
def tenant(api: httpx.Client) -> str:
    name = unique("t")
    assert api.post("/v1/admin/tenants", json={"name": name}).status_code == 201
    return name


def new_token(api: httpx.Client, tenant: str, scopes: list[str], **extra) -> dict:
    response = api.post(
        "/v1/admin/tokens", json={"tenant": tenant, "name": "test", "scopes": scopes, **extra}
    )
    assert response.status_code == 201, response.text
    return response.json()


# --- the admin API ---------------------------------------------------------------------------


def test_tenants_are_added_listed_and_removed(api: httpx.Client, router_process) -> None:
    name = unique("t")
    created = api.post("/v1/admin/tenants", json={"name": name, "description": "a test"})
    assert created.status_code == 201
    assert created.json() | {"created_at": None} == {
        "name": name,
        "description": "a test",
        "created_at": None,
        "owners": 0,
        "tokens": 0,
    }
    again = api.post("/v1/admin/tenants", json={"name": name})
    assert (again.status_code, again.json()["error"]["field"]) == (409, "name")
    bad = api.post("/v1/admin/tenants", json={"name": "Not A Name"})
    assert (bad.status_code, bad.json()["error"]["field"]) == (422, "name")

    token = new_token(api, name, list(DATA_SCOPES))
    with client_for(router_process.url, token["token"]) as tenant_api:
        assert post_audit(tenant_api, [{"owner": unique("o"), "content": "x"}]).status_code == 200
    listed = {t["name"]: t for t in api.get("/v1/admin/tenants").json()}
    assert listed[name]["owners"] == 1 and listed[name]["tokens"] == 1
    assert {"system", "default"} <= set(listed)

    refused = api.delete(f"/v1/admin/tenants/{name}")
    assert refused.status_code == 409 and "owns 1" in refused.json()["error"]["message"]
    system = api.delete("/v1/admin/tenants/system")
    assert (system.status_code, system.json()["error"]["field"]) == (409, "name")
    assert api.delete(f"/v1/admin/tenants/{unique('t')}").status_code == 404

    empty = unique("t")
    api.post("/v1/admin/tenants", json={"name": empty})
    gone = new_token(api, empty, ["audit:read"])
    assert api.delete(f"/v1/admin/tenants/{empty}").status_code == 409
    assert api.delete(f"/v1/admin/tenants/{empty}", params={"force": "true"}).status_code == 204
    assert api.get(f"/v1/admin/tokens/{gone['id']}").status_code == 404
    with client_for(router_process.url, gone["token"]) as removed:
        assert (
            removed.get("/v1/audit/search", params={"owner": "x", **recent_window()}).status_code
            == 401
        )


def test_a_token_is_shown_once_and_stored_as_a_hash(
    api: httpx.Client, tenant: str, settings: Settings, cluster
) -> None:
    made = new_token(
        api,
        tenant,
        ["audit:read", "owner:eu-"],
        expires_at=(clock_now() + timedelta(days=3)).isoformat(),
        limits={"rate_per_s": 5, "max_searches": 2},
    )
    text = made.pop("token")
    assert text.startswith(f"shl_{made['id']}_")
    assert made["scopes"] == ["audit:read", "owner:eu-"]
    assert made["state"] == "active" and made["revoked_at"] is None
    assert made["limits"] == {"rate_per_s": 5.0, "ingest_bytes_per_s": None, "max_searches": 2}
    assert made["created_by"].startswith("token ")  # the admin token that made it
    assert api.get(f"/v1/admin/tokens/{made['id']}").json() == made
    listing = api.get("/v1/admin/tokens", params={"tenant": tenant})
    assert listing.json() == [made]
    secret = text.rsplit("_", 1)[1]
    stored = cluster.metadata.psql(
        "shardlog", f"SELECT encode(secret_sha256, 'hex') FROM api_tokens WHERE id = '{made['id']}'"
    ).strip()
    assert secret not in stored and len(stored) == 64
    assert text not in api.get("/v1/admin/tokens").text


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"scopes": ["admin"]}, 422, "scopes"),
        ({"scopes": ["audit:read", "audit:delete"]}, 422, "scopes[1]"),
        ({"scopes": ["owner:x"]}, 422, "scopes"),
        ({"scopes": []}, 422, "scopes"),
        ({"scopes": ["audit:read"], "expires_at": "2001-01-01T00:00:00Z"}, 422, "expires_at"),
        ({"scopes": ["audit:read"], "expires_at": "tomorrow"}, 422, "expires_at"),
        ({"scopes": ["audit:read"], "limits": {"max_searches": 0}}, 422, "limits.max_searches"),
        ({"scopes": ["audit:read"], "tenant": "no-such-tenant"}, 404, "tenant"),
    ],
)
def test_bad_tokens_are_refused(api: httpx.Client, tenant: str, body, status, field) -> None:
    response = api.post("/v1/admin/tokens", json={"tenant": tenant, "name": "bad", **body})
    assert (response.status_code, response.json()["error"]["field"]) == (status, field)


def test_revocation_holds_at_once_on_the_router_that_revoked(
    api: httpx.Client, tenant: str, router_process
) -> None:
    made = new_token(api, tenant, ["audit:read"])
    with client_for(router_process.url, made["token"]) as client:
        search = {"owner": unique("o"), **recent_window()}
        assert client.get("/v1/audit/search", params=search).status_code == 200
        revoked = api.delete(f"/v1/admin/tokens/{made['id']}")
        assert revoked.status_code == 200 and revoked.json()["state"] == "revoked"
        refused = client.get("/v1/audit/search", params=search)
        assert refused.status_code == 401
        assert refused.json()["error"]["message"] == f"token {made['id']} was revoked"
        assert refused.headers["www-authenticate"].startswith("Bearer")
    again = api.delete(f"/v1/admin/tokens/{made['id']}")
    assert again.json()["revoked_at"] == revoked.json()["revoked_at"]
    assert api.delete("/v1/admin/tokens/0123456789abcdef").status_code == 404
    assert api.delete("/v1/admin/tokens/not-an-id").status_code == 422


def test_last_used_is_written_in_batches(api: httpx.Client, tenant: str, router_process) -> None:
    started = clock_now()
    made = new_token(api, tenant, ["audit:read"])
    assert made["last_used_at"] is None
    with client_for(router_process.url, made["token"]) as client:
        for _ in range(3):
            client.get("/v1/audit/search", params={"owner": unique("o"), **recent_window()})

    def used() -> str | None:
        return api.get(f"/v1/admin/tokens/{made['id']}").json()["last_used_at"]

    assert datetime.fromisoformat(eventually(used, timeout=10)) >= started


def test_last_used_times_do_not_bump_the_catalog_version(
    api: httpx.Client, tenant: str, router_process, cluster
) -> None:
    """Only changes routers must see bump it: a version per flush would make every router
    reload its catalog every few seconds."""
    made = new_token(api, tenant, ["audit:read"])

    def version() -> int:
        return int(cluster.metadata.psql("shardlog", "SELECT version FROM catalog_version"))

    before = version()
    with client_for(router_process.url, made["token"]) as client:
        client.get("/v1/audit/search", params={"owner": unique("o"), **recent_window()})
    eventually(lambda: api.get(f"/v1/admin/tokens/{made['id']}").json()["last_used_at"], timeout=10)
    assert version() == before


# --- keys across tenants -----------------------------------------------------------------------


def test_a_foreign_key_is_a_403_naming_it_and_nothing_is_written_or_claimed(
    api: httpx.Client, router_process, settings: Settings
) -> None:
    acme = issue_token(settings, unique("acme"), DATA_SCOPES)
    other = issue_token(settings, unique("other"), DATA_SCOPES)
    owner, fresh = unique("acme-owner"), unique("fresh")
    with client_for(router_process.url, acme) as a, client_for(router_process.url, other) as b:
        assert post_audit(a, [{"owner": owner, "content": "acme's"}]).status_code == 200
        refused = post_audit(
            b,
            [
                {"owner": fresh, "content": "mine"},
                {"owner": owner, "content": "theirs"},
                {"owner": owner, "content": "theirs again"},
            ],
        )
        assert refused.status_code == 403
        assert refused.json()["error"]["field"] == "records[1].owner"
        assert repr(owner) in refused.json()["error"]["message"]
        assert owner_id(api, "audit", fresh) is None  # not claimed either
        search = {"owner": owner, **recent_window()}
        found = b.get("/v1/audit/search", params=search)
        assert (found.status_code, found.json()["error"]["field"]) == (403, "owner")
        assert b.get("/v1/audit/export", params=search).status_code == 403
        assert [i["content"] for i in a.get("/v1/audit/search", params=search).json()["items"]] == [
            "acme's"
        ]
        # The same for switches, in CSV (the switch from the query) and in DELETE.
        switch = unique("edge")
        csv = {"content-type": "text/csv"}
        assert (
            a.post(
                f"/v1/flows?switch={switch}", content=b"10.0.0.1,10.0.0.2,1,2\n", headers=csv
            ).status_code
            == 200
        )
        csv_refused = b.post(
            f"/v1/flows?switch={switch}", content=b"10.0.0.1,10.0.0.2,1,2\n", headers=csv
        )
        assert (csv_refused.status_code, csv_refused.json()["error"]["field"]) == (
            403,
            "lines[1].switch",
        )
        today = clock_now().date().isoformat()
        delete = {"switch": switch, "from": today, "to": today}
        delete["flows"] = [
            {"src_ip": "10.0.0.1", "dst_ip": "10.0.0.2", "src_port": 1, "dst_port": 2}
        ]
        deleted = b.request("DELETE", "/v1/flows", json=delete)
        assert (deleted.status_code, deleted.json()["error"]["field"]) == (403, "switch")
        flows = a.get("/v1/flows/search", params={"switch": switch, **recent_window()}).json()[
            "items"
        ]
        assert len(flows) == 1 and flows[0]["bytes"] == 0
    mapping = api.get("/v1/admin/owners", params={"kind": "audit", "key": owner}).json()
    assert mapping["tenant"].startswith("acme-")


def test_prefix_scopes_narrow_a_token_within_its_tenant(router_process, settings: Settings) -> None:
    name = unique("pfx")
    eu = issue_token(settings, name, ["audit:write", "audit:read", "owner:eu-"])
    with client_for(router_process.url, eu) as client:
        assert post_audit(client, [{"owner": unique("eu"), "content": "x"}]).status_code == 200
        outside = post_audit(
            client,
            [{"owner": unique("eu"), "content": "x"}, {"owner": unique("us"), "content": "y"}],
        )
        assert (outside.status_code, outside.json()["error"]["field"]) == (403, "records[1].owner")
        assert "outside this token's owner prefixes" in outside.json()["error"]["message"]
        search = client.get("/v1/audit/search", params={"owner": "us-1", **recent_window()})
        assert search.status_code == 403


def test_owner_mapping_names_and_moves_tenants(api: httpx.Client, tenant: str) -> None:
    key = unique("mapped")
    body = {"kind": "audit", "key": key, "group": "group1"}
    missing = api.put("/v1/admin/owners", json=body)
    assert (missing.status_code, missing.json()["error"]["field"]) == (422, "tenant")
    unknown = api.put("/v1/admin/owners", json={**body, "tenant": unique("nope")})
    assert (unknown.status_code, unknown.json()["error"]["field"]) == (404, "tenant")
    assert api.put("/v1/admin/owners", json={**body, "tenant": tenant}).json()["tenant"] == tenant
    kept = api.put("/v1/admin/owners", json=body)  # no tenant: the key keeps its own
    assert kept.json()["tenant"] == tenant
    moved = api.put("/v1/admin/owners", json={**body, "tenant": "default"})
    assert (moved.status_code, moved.json()["error"]["field"]) == (409, "tenant")
    forced = api.put("/v1/admin/owners", json={**body, "tenant": "default", "force": True})
    assert forced.json()["tenant"] == "default"


# --- the CLI ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_tenants_and_tokens(settings: Settings, router_process) -> None:
    name = unique("cli")
    assert run_cli(settings, "tenants", "add", name).returncode == 0
    listed = run_cli(settings, "tenants", "list", "--json")
    assert name in {t["name"] for t in orjson.loads(listed.stdout)}
    made = run_cli(
        settings,
        "tokens",
        "create",
        "--tenant",
        name,
        "--name",
        "ci",
        "--scopes",
        "audit:read,audit:write",
        "--expires-days",
        "1",
    )
    assert made.returncode == 0, made.stderr
    text = made.stdout.strip()
    assert text.startswith("shl_") and "shown once" in made.stderr and text not in made.stderr
    with client_for(router_process.url, text) as client:
        assert post_audit(client, [{"owner": unique("cli"), "content": "x"}]).status_code == 200
    tokens = orjson.loads(run_cli(settings, "tokens", "list", "--tenant", name, "--json").stdout)
    assert [t["scopes"] for t in tokens] == [["audit:write", "audit:read"]]
    assert text not in str(tokens)
    revoked = run_cli(settings, "tokens", "revoke", tokens[0]["id"])
    assert revoked.returncode == 0 and "revoked" in revoked.stdout

    def refused() -> bool:
        with client_for(router_process.url, text) as client:
            return (
                client.get("/v1/audit/search", params={"owner": "x", **recent_window()}).status_code
                == 401
            )

    eventually(refused, timeout=2)
    bad = run_cli(
        settings, "tokens", "create", "--tenant", name, "--name", "x", "--scopes", "admin"
    )
    assert bad.returncode == 2 and "(scopes)" in bad.stderr
    blocked = run_cli(settings, "tenants", "remove", name)
    assert blocked.returncode == 2 and "owns 1" in blocked.stderr


# --- make up ---------------------------------------------------------------------------------


def test_make_up_tokens_are_made_once_and_kept(
    settings: Settings, cluster, router_process, api: httpx.Client, tmp_path
) -> None:
    local = settings.model_copy(
        update={"cluster": settings.cluster.model_copy(update={"data_dir": tmp_path / "var"})}
    )
    first = asyncio.run(bootstrap.ensure_local_tokens(local, "tests"))
    assert [(f.label, f.outcome) for f in first] == [
        ("admin", "created"),
        ("default read/write", "created"),
    ]
    directory = tmp_path / "var" / "tokens"
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for file in first:
        assert stat.S_IMODE(file.path.stat().st_mode) == 0o600
    admin = (directory / "admin.token").read_text().strip()
    default = (directory / "default.token").read_text().strip()
    second = asyncio.run(bootstrap.ensure_local_tokens(local, "tests"))
    assert [f.outcome for f in second] == ["kept", "kept"]
    assert (directory / "default.token").read_text().strip() == default

    with (
        client_for(router_process.url, admin) as admin_api,
        client_for(router_process.url, default) as default_api,
    ):
        assert admin_api.get("/v1/admin/tenants").status_code == 200
        owner = unique("mine")
        assert post_audit(default_api, [{"owner": owner, "content": "x"}]).status_code == 200
        assert (
            admin_api.get("/v1/admin/owners", params={"kind": "audit", "key": owner}).json()[
                "tenant"
            ]
            == "default"
        )
        forbidden = default_api.get("/v1/admin/tenants")
        assert forbidden.status_code == 403 and "'admin'" in forbidden.json()["error"]["message"]
        default_id = default.split("_")[1]
        assert admin_api.delete(f"/v1/admin/tokens/{default_id}").status_code == 200
    third = asyncio.run(bootstrap.ensure_local_tokens(local, "tests"))
    assert [f.outcome for f in third] == ["kept", "created"]
    assert (directory / "default.token").read_text().strip() != default


# --- open mode ---------------------------------------------------------------------------------


def test_open_mode_asks_for_nothing_and_says_so(settings: Settings, cluster, capsys) -> None:
    opened = settings.model_copy(update={"auth": AuthSettings(mode="open")})
    owner = unique("open")
    with TestClient(create_app(opened)) as client:
        assert post_audit(client, [{"owner": owner, "content": "x"}]).status_code == 200
        mapping = client.get("/v1/admin/owners", params={"kind": "audit", "key": owner}).json()
        assert mapping["tenant"] == "default"
    assert "AUTHENTICATION IS OFF" in capsys.readouterr().err


# --- a second router ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def second_router(settings: Settings, cluster, tmp_path_factory) -> Iterator[RouterProcess]:
    """Another router on the session's catalog (its poll interval of 3 s: a change it sees
    within a second came by NOTIFY)."""
    port = free_port()
    env = {**settings_env(settings), "SHARDLOG_SERVER__PORT": str(port)}
    router = RouterProcess(tmp_path_factory.mktemp("second"), settings.server.host, port, env=env)
    with running_router(router):
        yield router


def _refused_within(client: httpx.Client, params: dict[str, str], limit_s: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < limit_s + 2:
        if client.get("/v1/audit/search", params=params).status_code == 401:
            return time.monotonic() - started
        time.sleep(0.01)
    raise AssertionError(f"still accepted {limit_s + 2:g} s after the revocation")


@pytest.mark.parametrize("how", ["api", "cli"])
def test_revocation_reaches_another_router_within_a_second(
    api: httpx.Client, tenant: str, second_router, settings: Settings, how: str
) -> None:
    assert settings.catalog.poll_interval_s >= 3
    made = new_token(api, tenant, ["audit:read"])
    params = {"owner": unique("o"), **recent_window()}
    with client_for(second_router.url, made["token"]) as elsewhere:
        # A new token reaches the other router the same way.
        eventually(
            lambda: elsewhere.get("/v1/audit/search", params=params).status_code == 200,
            timeout=1,
            interval=0.01,
        )
        if how == "api":
            assert api.delete(f"/v1/admin/tokens/{made['id']}").status_code == 200
        else:
            assert run_cli(settings, "tokens", "revoke", made["id"]).returncode == 0
        took = _refused_within(elsewhere, params, 1.0)
    assert took < 1.0, f"refused after {took:.2f} s"


# --- the platform audits itself ------------------------------------------------------------------


def admin_rows(api: httpx.Client, query: str) -> list[dict]:
    params = {"owner": "shardlog.admin", **recent_window(), "q": query, "limit": 1000}
    page = api.get("/v1/audit/search", params=params)
    assert page.status_code == 200, page.text
    return page.json()["items"]


def test_admin_actions_are_audit_rows_of_the_system_owner(
    api: httpx.Client, tenant: str, settings: Settings
) -> None:
    made = new_token(api, tenant, ["audit:read"])
    actor_id = api.headers["authorization"].split("_")[1]
    (created,) = admin_rows(api, f"token.create {made['id']}")
    assert created["content"].startswith(f"token.create {made['id']} by token {actor_id}")
    assert created["attrs"] | {"expires_at": None} == {
        "action": "token.create",
        "actor": created["attrs"]["actor"],
        "target": made["id"],
        "tenant": tenant,
        "name": "test",
        "scopes": ["audit:read"],
        "expires_at": None,
        "token_id": actor_id,
    }
    assert made["token"].split("_")[2] not in str(admin_rows(api, "token."))
    # The CLI writes its actions there too.
    assert run_cli(settings, "tokens", "revoke", made["id"]).returncode == 0
    (revoked,) = admin_rows(api, f"token.revoke {made['id']}")
    assert revoked["attrs"]["actor"].startswith("cli (")
    # Searchable and exportable like any other owner, retained by a policy of its own.
    export = api.get("/v1/audit/export", params={"owner": "shardlog.admin", **recent_window()})
    assert export.status_code == 200 and made["id"] in export.text
    own = [
        p for p in api.get("/v1/admin/retention/policies").json() if p["owner"] == "shardlog.admin"
    ]
    assert [p["keep_days"] for p in own] == [settings.auth.audit_keep_days]


def test_the_platforms_keys_are_reserved(router_process, settings: Settings) -> None:
    token = issue_token(settings, unique("res"), DATA_SCOPES)
    with client_for(router_process.url, token) as client:
        for key in ("shardlog.admin", "shardlog.anything"):
            written = post_audit(client, [{"owner": key, "content": "forged"}])
            assert written.status_code == 403 and "reserved" in written.json()["error"]["message"]
            read = client.get("/v1/audit/search", params={"owner": key, **recent_window()})
            assert read.status_code == 403


def test_an_anonymous_body_is_refused_before_it_is_read(router_process) -> None:
    """FastAPI reads a JSON body before a route's dependencies: the 401 comes from the
    authentication middleware, with 100 MB announced and none of it sent."""
    host, port = router_process.url.removeprefix("http://").split(":")
    for path in ("/v1/admin/tokens", "/v1/flows", "/v1/nowhere"):
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            method = "DELETE" if path == "/v1/flows" else "POST"
            sock.sendall(
                f"{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                f"content-length: {100 * 2**20}\r\n\r\n".encode()
            )
            answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 401 "), answer
        assert b"www-authenticate: Bearer" in answer.lower().replace(b"bearer", b"Bearer")


def test_idempotency_keys_are_per_tenant(router_process, settings: Settings) -> None:
    """The same Idempotency-Key from two tenants: two writes, neither sees the other's."""
    key = unique("shared-key")
    for name in (unique("idem-a"), unique("idem-b")):
        token = issue_token(settings, name, DATA_SCOPES)
        owner = unique("o")
        with client_for(router_process.url, token) as client:
            body = ndjson([{"owner": owner, "content": name}])
            headers = {"content-type": "application/x-ndjson", "Idempotency-Key": key}
            assert client.post("/v1/audit", content=body, headers=headers).json() == {"accepted": 1}
            page = client.get("/v1/audit/search", params={"owner": owner, **recent_window()}).json()
            assert [item["content"] for item in page["items"]] == [name]
