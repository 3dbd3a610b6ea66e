"""A syslog message whose owner is a key of the platform (its app name `shardlog.admin`, say)
is refused by the write path and counted, whatever tenant the listener writes as; the
messages sent with it are stored."""

from __future__ import annotations

import socket
import time
from datetime import timedelta

import httpx
import pytest

from router import clock
from tests.syslog.platform import RunningSyslog, found, unique

REJECTED = "shardlog_protocol_messages_total"


@pytest.mark.parametrize("app_name", ["shardlog.admin", "shardlog.forged"])
def test_a_platform_owner_is_refused_and_counted(
    listener: RunningSyslog, api: httpx.Client, admin_api: httpx.Client, app_name: str
) -> None:
    marker, owner = unique("forged"), unique("beside-forged")
    before = listener.metric(REJECTED, protocol="syslog", outcome="rejected")
    forged = f"<13>1 - host {app_name} - - - {marker}".encode()
    good = f'<13>1 - - - - - [shardlog@32473 owner="{owner}"] {marker}'.encode()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.sendto(forged, ("127.0.0.1", listener.port))
        udp.sendto(good, ("127.0.0.1", listener.port))
    deadline = time.monotonic() + 20
    while listener.metric(REJECTED, protocol="syslog", outcome="rejected") < before + 1:
        assert time.monotonic() < deadline, "the forged message was never counted as rejected"
        time.sleep(0.1)
    assert [item["content"] for item in found(api, owner, 1)] == [marker]
    now = clock.now()
    params = {
        "owner": app_name,
        "from": (now - timedelta(days=2)).isoformat(),
        "to": (now + timedelta(hours=1)).isoformat(),
        "q": marker,
    }
    searched = api.get("/v1/audit/search", params=params)
    assert searched.status_code in (200, 404), searched.text
    assert searched.status_code == 404 or searched.json()["items"] == []
    if app_name != "shardlog.admin":
        unmapped = admin_api.get("/v1/admin/owners", params={"kind": "audit", "key": app_name})
        assert unmapped.status_code == 404, unmapped.text
