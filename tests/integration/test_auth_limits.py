"""Per-token limits on the session router: requests per second, write bytes per second and
searches at once, each a 429 with Retry-After, each per token."""

from __future__ import annotations

import time
import uuid
from socket import SO_RCVBUF, SOL_SOCKET

import httpx
import orjson

from router.auth.scopes import DATA_SCOPES
from router.auth.store import TokenLimits
from router.settings import Settings
from tests.support import bearer, eventually, issue_token, recent_window


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def client(
    router_process,
    settings: Settings,
    tenant: str,
    limits: TokenLimits,
    receive_buffer: int | None = None,
) -> httpx.Client:
    """``receive_buffer``: a fixed socket receive buffer (loopback autotuning grows it up to
    net.ipv4.tcp_rmem's maximum, 32 MB here, which can take a whole answer unread)."""
    token = issue_token(settings, tenant, DATA_SCOPES, limits=limits)
    options = [] if receive_buffer is None else [(SOL_SOCKET, SO_RCVBUF, receive_buffer)]
    transport = httpx.HTTPTransport(socket_options=options)
    return httpx.Client(
        base_url=router_process.url, timeout=60, headers=bearer(token), transport=transport
    )


def test_over_the_request_rate_is_429_with_retry_after(router_process, settings) -> None:
    tenant = unique("rate")
    # 2 per second, a bucket of 2 s: 4 at once, then one every half second.
    with (
        client(router_process, settings, tenant, TokenLimits(rate_per_s=2)) as slow,
        client(router_process, settings, tenant, TokenLimits()) as other,
    ):
        params = {"owner": unique("o"), **recent_window()}
        statuses = [slow.get("/v1/audit/search", params=params).status_code for _ in range(6)]
        assert statuses[:4] == [200] * 4 and statuses[4:] == [429, 429]
        refused = slow.get("/v1/audit/search", params=params)
        assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["code"] == "overloaded"
        assert "2 requests per second" in refused.json()["error"]["message"]
        # Per token: another token of the same tenant is not held back.
        assert other.get("/v1/audit/search", params=params).status_code == 200
        time.sleep(0.6)
        assert slow.get("/v1/audit/search", params=params).status_code == 200


def test_write_bytes_over_the_rate_make_the_next_write_wait(router_process, settings) -> None:
    tenant, owner = unique("bytes"), unique("o")
    # 1000 bytes per second, a bucket of 2000: a 6000-byte body passes (a body is never cut
    # off half way) and leaves 4 s of debt that the next writes wait out.
    with client(router_process, settings, tenant, TokenLimits(ingest_bytes_per_s=1000)) as api:
        body = orjson.dumps([{"owner": owner, "content": "x" * 5900}])
        assert api.post("/v1/audit", content=body).status_code == 200
        refused = api.post("/v1/audit", content=body)
        assert refused.status_code == 429
        assert 3 <= int(refused.headers["retry-after"]) <= 4
        assert "1000 bytes per second" in refused.json()["error"]["message"]
        # Reads do not wait for the write debt.
        page = api.get("/v1/audit/search", params={"owner": owner, **recent_window()})
        assert page.status_code == 200 and len(page.json()["items"]) == 1


def test_a_token_runs_at_most_its_searches_at_once(router_process, settings) -> None:
    tenant, owner = unique("searches"), unique("o")
    limits = TokenLimits(max_searches=1)
    with client(router_process, settings, tenant, limits, receive_buffer=65536) as api:
        # About 24 MB of export: far more than the sockets buffer (the receive buffer is fixed
        # small), so the router is still sending (and holds the token's one search slot) while
        # this client does not read.
        record = {"owner": owner, "content": "y" * 1000}
        body = b"".join(orjson.dumps(record) + b"\n" for _ in range(20_000))
        headers = {"content-type": "application/x-ndjson"}
        assert api.post("/v1/audit", content=body, headers=headers).status_code == 200
        params = {"owner": owner, **recent_window()}
        with api.stream("GET", "/v1/audit/export", params=params) as export:
            assert export.status_code == 200
            next(export.iter_bytes())
            refused = api.get("/v1/audit/search", params=params)
            assert refused.status_code == 429, refused.text
            assert refused.headers["retry-after"] == "1"
            assert "searches or exports" in refused.json()["error"]["message"]
        # The export's connection is gone: its slot comes back.
        eventually(
            lambda: api.get("/v1/audit/search", params={**params, "limit": 1}).status_code == 200,
            timeout=10,
        )
