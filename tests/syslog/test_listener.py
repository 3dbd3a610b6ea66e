"""The listener beyond well-behaved clients: what it refuses is counted and nothing of it is
stored, a stream whose framing breaks is closed while the listener goes on, RELP spoken by
hand (pipelined commands answered in order after the commit), its HTTP endpoint."""

from __future__ import annotations

import socket
import time
from datetime import datetime, timedelta

import httpx
import pytest

from router import clock
from tests.syslog.platform import RunningSyslog, found, none_found, unique

REFUSED = "shardlog_syslog_refused_messages_total"


def wait_for(listener: RunningSyslog, name: str, at_least: float, **labels: str) -> None:
    deadline = time.monotonic() + 10
    while listener.metric(name, **labels) < at_least:
        assert time.monotonic() < deadline, f"{name} {labels} stayed below {at_least}"
        time.sleep(0.1)


def test_refused_messages_are_counted_and_not_stored(
    listener: RunningSyslog, api: httpx.Client
) -> None:
    owner = unique("refused")
    before = {
        reason: listener.metric(REFUSED, reason=reason)
        for reason in ("no PRI", "oversize", "no owner", "refused by the audit rules")
    }
    bad = [
        f"no pri {owner}".encode(),
        f'<13>1 - - - - - [shardlog@32473 owner="{owner}"] {"x" * 5000}'.encode(),
        b"<13>1 - - - - - - nobody owns this",
        f'<13>1 - - - - - [shardlog@32473 owner="{owner}"] nul \x00 inside'.encode(),
    ]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        for message in bad:
            udp.sendto(message, ("127.0.0.1", listener.port))
    with socket.create_connection(("127.0.0.1", listener.port)) as tcp:
        tcp.sendall(b"".join(message + b"\n" for message in bad))
    for reason, count in before.items():
        wait_for(listener, REFUSED, count + 2, reason=reason)
    # A good message after them, on both transports: the listener goes on.
    good = f'<13>1 - - - - - [shardlog@32473 owner="{owner}"] fine'.encode()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.sendto(good, ("127.0.0.1", listener.port))
    items = found(api, owner, 1)
    time.sleep(0.5)
    assert (
        [item["content"] for item in found(api, owner, 1)]
        == ["fine"]
        == [item["content"] for item in items]
    )


def test_a_broken_octet_count_closes_the_connection(
    listener: RunningSyslog, api: httpx.Client
) -> None:
    owner = unique("broken")
    message = f'<13>1 - - - - - [shardlog@32473 owner="{owner}"] kept'.encode()
    before = listener.metric(REFUSED, reason="unframeable")
    with socket.create_connection(("127.0.0.1", listener.port), timeout=10) as tcp:
        tcp.sendall(str(len(message)).encode() + b" " + message + b"12x not a length")
        assert tcp.recv(10) == b""  # closed by the listener
    wait_for(listener, REFUSED, before + 1, reason="unframeable")
    assert [item["content"] for item in found(api, owner, 1)] == ["kept"]


def relp_exchange(port: int, commands: list[bytes]) -> list[bytes]:
    """Commands sent at once; the answers, one per line of each rsp frame's header."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(b"".join(commands))
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    return received.split(b"\n")


def test_relp_by_hand(listener: RunningSyslog, api: httpx.Client) -> None:
    owner = unique("relp")
    offers = b"relp_version=0\nrelp_software=test\ncommands=syslog"
    commands = [b"1 open %d %s\n" % (len(offers), offers)]
    for n in range(2, 12):
        body = f'<13>1 - h a - - [shardlog@32473 owner="{owner}"] event {n}'.encode()
        commands.append(b"%d syslog %d %s\n" % (n, len(body), body))
    commands.append(b"12 syslog 9 not a log\n")  # refused (no PRI): answered, not stored
    commands.append(b"13 close 0\n")
    lines = relp_exchange(listener.relp_port, commands)
    answers = [line for line in lines if b" rsp " in line]
    assert answers[0].startswith(b"1 rsp ") and answers[0].endswith(b"200 OK")
    assert answers[1:] == [b"%d rsp 6 200 OK" % n for n in range(2, 13)] + [b"13 rsp 0"]
    # Answered after the commit: already searchable.
    items = found(api, owner, 10, timeout=0.1)
    assert [item["content"] for item in items] == [f"event {n}" for n in range(2, 12)]


def test_relp_before_open_is_refused(listener: RunningSyslog, api: httpx.Client) -> None:
    owner = unique("relp-unopened")
    body = f'<13>1 - h a - - [shardlog@32473 owner="{owner}"] early'.encode()
    lines = relp_exchange(
        listener.relp_port, [b"1 syslog %d %s\n" % (len(body), body), b"2 close 0\n"]
    )
    assert lines[0].startswith(b"1 rsp ") and b" 500 " in lines[0]
    time.sleep(0.5)
    assert none_found(api, owner)


@pytest.mark.parametrize(("path", "status"), [("/health", 200), ("/metrics", 200), ("/x", 404)])
def test_the_http_endpoint(listener: RunningSyslog, path: str, status: int) -> None:
    response = httpx.get(f"{listener.metrics_url}{path}", timeout=5)
    assert response.status_code == status
    if path == "/metrics":
        assert 'shardlog_protocol_messages_total{outcome="accepted",protocol="syslog"}' in (
            response.text
        )


def test_rfc3164_with_fractional_seconds(listener: RunningSyslog, api: httpx.Client) -> None:
    """What syslog-ng sends with frac-digits(6) (#35 item 14): stored with its microseconds."""
    owner = unique("frac")
    sent = clock.now().replace(microsecond=123456) - timedelta(minutes=1)
    month = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
    stamp = f"{month[sent.month - 1]} {sent.day:2d} {sent:%H:%M:%S.%f}"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.sendto(f"<134>{stamp} web-7 {owner}[1]: x".encode(), ("127.0.0.1", listener.port))
    (item,) = found(api, owner, 1)
    assert datetime.fromisoformat(item["ts"]) == sent
    assert item["attrs"]["hostname"] == "web-7" and item["attrs"]["procid"] == "1"
