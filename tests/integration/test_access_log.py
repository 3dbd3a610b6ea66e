"""The router's access log: one line per request with the path and never the query string
(a search's patterns and keys stay out of the log); a path cannot forge a line."""

from __future__ import annotations

import time
import uuid

import httpx

from services.router_process import RouterProcess


def lines_with(router: RouterProcess, marker: str, timeout_s: float = 5.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while True:
        found = [
            line
            for line in router.log_file.read_text(errors="replace").splitlines()
            if marker in line
        ]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_a_search_is_logged_without_its_query_string(
    api: httpx.Client, router_process: RouterProcess
) -> None:
    secret = f"secret-{uuid.uuid4().hex}"
    owner = f"access-{uuid.uuid4().hex[:8]}"
    answer = api.get(
        "/v1/audit/search",
        params={
            "owner": owner,
            "from": "2026-11-23T00:00:00Z",
            "to": "2026-11-23T01:00:00Z",
            "q": secret,
        },
    )
    assert answer.status_code == 200, answer.text
    # The metrics scrape after it is logged too: a line that is certainly later than ours.
    marker = f"/metrics-{uuid.uuid4().hex}"
    assert api.get(marker).status_code == 404
    assert lines_with(router_process, marker)
    log = router_process.log_file.read_text(errors="replace")
    assert secret not in log
    assert owner not in log
    assert '"GET /v1/audit/search" 200' in log


def test_a_path_cannot_forge_a_log_line(api: httpx.Client, router_process: RouterProcess) -> None:
    forged = f"forged-{uuid.uuid4().hex}"
    answer = api.get(f"/v1/nothing%0A{forged}%20INFO%20shardlog.access")
    assert answer.status_code == 404
    (line,) = lines_with(router_process, forged)
    assert "shardlog.access" in line.split(forged)[0]
    assert f"/v1/nothing\\n{forged}" in line
