"""rsyslogd forwarding to the listener over TCP (octet counted, RFC 5424), UDP (its traditional
BSD format), RELP (omrelp) and TLS (gtls, the certificate checked by name): the messages fed to
it found by search with their owner, exact ts and attrs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import httpx
import pytest

from router import clock
from tests.syslog.platform import RunningSyslog, found, unique
from tests.syslog.rsyslog import PATHS, Rsyslog

SD_ID = "shardlog@32473"


@pytest.fixture(scope="module")
def rsyslog(
    listener: RunningSyslog, syslog_ports: Iterator[int], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Rsyslog]:
    home: Path = tmp_path_factory.mktemp("rsyslog")
    forwarder = Rsyslog(home, {path: next(syslog_ports) for path in PATHS}, listener)
    forwarder.start()
    try:
        yield forwarder
    finally:
        output = forwarder.stop()
        assert "error" not in output.lower(), output


def rfc5424(ts: datetime, app: str, owner: str, text: str) -> bytes:
    stamp = ts.isoformat(timespec="microseconds").replace("+00:00", "Z")
    sd = f'[{SD_ID} owner="{owner}"][origin@32473 ip="192.0.2.7"]'
    return f"<38>1 {stamp} web-7.example {app} 77 AUDIT {sd} {text}".encode()


@pytest.mark.parametrize("path", PATHS)
def test_forwarded_messages_are_stored(rsyslog: Rsyslog, api: httpx.Client, path: str) -> None:
    owner = unique(f"rsyslog-{path}")
    # The owner rule takes the SD parameter; the formats that drop structured data (UDP's
    # traditional format, RELP's forward format) carry the owner as the tag (app_name).
    app = owner if path in ("udp", "relp") else "payroll"
    base = clock.now().replace(microsecond=123456) - timedelta(minutes=5)
    sent = [base + timedelta(seconds=n, microseconds=n) for n in range(4)]
    rsyslog.send(path, [rfc5424(ts, app, owner, f"{path} event {n}") for n, ts in enumerate(sent)])
    items = found(api, owner, len(sent))
    assert [item["content"] for item in items] == [f"{path} event {n}" for n in range(4)]
    for item, ts in zip(items, sent, strict=True):
        stored = datetime.fromisoformat(item["ts"])
        # RFC 3164's timestamp has whole seconds.
        assert stored == (ts.replace(microsecond=0) if path == "udp" else ts)
        attrs = item["attrs"]
        assert (attrs["facility"], attrs["severity"]) == ("auth", "info")
        assert attrs["hostname"] == "web-7.example"
        assert attrs["app_name"] == app and attrs["procid"] == "77"
        if path in ("tcp", "tls"):
            assert attrs["msgid"] == "AUDIT"
            assert attrs["sd"] == {SD_ID: {"owner": owner}, "origin@32473": {"ip": "192.0.2.7"}}
