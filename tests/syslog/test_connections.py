"""The listener's connection caps and idle timeout against a listener process of its own with
small ones: a source over its cap is closed at once while another source's messages are
stored; the cap in all spans TCP, TLS and RELP and /health answers at it; silent connections
(a TLS handshake that never comes too) are closed after the idle timeout, a sender that keeps
talking is not."""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from router.settings import Settings
from services.cluster import LocalCluster
from tests.syslog.platform import RunningSyslog, found, unique

CAP = 6
SOURCE_CAP = 3
IDLE_S = 3.0
# Timers, scheduling on a shared 2-core machine and the test's own polling.
SLACK_S = 1.5
OPEN = "shardlog_syslog_connections"
REFUSED = "shardlog_syslog_refused_connections_total"
IDLE_CLOSED = "shardlog_syslog_idle_closed_connections_total"


# The sources these tests connect from (127.0.0.1-.8), mapped to the system tenant while they
# run: an unknown sender's connection would be closed at once, whatever the caps.
SOURCES = "127.0.0.0/28"


@pytest.fixture(scope="module")
def capped(
    settings: Settings,
    cluster: LocalCluster,
    syslog_ports: Iterator[int],
    tmp_path_factory: pytest.TempPathFactory,
    api: httpx.Client,
) -> Iterator[RunningSyslog]:
    mapped = api.put(f"/v1/admin/syslog-senders/{SOURCES}", json={"tenant": "system"})
    assert mapped.status_code in (200, 201), mapped.text
    limits = {
        "SHARDLOG_SYSLOG__MAX_CONNECTIONS": str(CAP),
        "SHARDLOG_SYSLOG__MAX_CONNECTIONS_PER_SOURCE": str(SOURCE_CAP),
        "SHARDLOG_SYSLOG__IDLE_TIMEOUT_S": str(IDLE_S),
    }
    home = tmp_path_factory.mktemp("syslog-capped")
    try:
        with RunningSyslog(home, settings, syslog_ports, limits).running() as process:
            yield process
    finally:
        assert api.delete(f"/v1/admin/syslog-senders/{SOURCES}").status_code == 204


def connect_from(source: str, port: int) -> socket.socket:
    """A loopback connection from ``source`` (any 127.0.0.0/8 address)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.settimeout(5)
    sock.connect(("127.0.0.1", port))
    return sock


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the listener closed ``sock`` within ``seconds``."""
    if not select.select([sock], [], [], seconds)[0]:
        return False
    try:
        return sock.recv(100) == b""
    except ConnectionResetError:
        return True


def settle(listener: RunningSyslog, count: int) -> None:
    """Wait until the listener holds ``count`` connections."""
    deadline = time.monotonic() + 10
    while listener.metric(OPEN) != count:
        assert time.monotonic() < deadline, f"{listener.metric(OPEN)} connections, not {count}"
        time.sleep(0.05)


def message(owner: str, text: str) -> bytes:
    return f'<13>1 - h a - - [shardlog@32473 owner="{owner}"] {text}\n'.encode()


def test_a_source_over_its_cap_is_closed_while_another_source_is_stored(
    capped: RunningSyslog, api: httpx.Client
) -> None:
    settle(capped, 0)
    before = capped.metric(REFUSED, reason="source connection cap")
    held = [connect_from("127.0.0.1", capped.port) for _ in range(SOURCE_CAP)]
    extra = connect_from("127.0.0.1", capped.port)
    try:
        settle(capped, SOURCE_CAP)
        assert closed_within(extra, IDLE_S - SLACK_S)  # at once, not by the idle timeout
        assert capped.metric(REFUSED, reason="source connection cap") == before + 1
        assert not any(closed_within(sock, 0) for sock in held)
        owner = unique("other-source")
        with connect_from("127.0.0.2", capped.port) as sender:
            sender.sendall(message(owner, "still stored"))
        assert [item["content"] for item in found(api, owner, 1)] == ["still stored"]
    finally:
        for sock in [*held, extra]:
            sock.close()


def test_the_cap_spans_tcp_tls_and_relp_and_health_answers_at_it(
    capped: RunningSyslog, api: httpx.Client
) -> None:
    settle(capped, 0)
    before = capped.metric(REFUSED, reason="connection cap")
    held = [connect_from("127.0.0.3", capped.port) for _ in range(2)]
    held += [connect_from("127.0.0.4", capped.relp_port) for _ in range(2)]
    held += [connect_from("127.0.0.5", capped.tls_port) for _ in range(2)]  # no handshake
    try:
        settle(capped, CAP)
        extra = connect_from("127.0.0.6", capped.port)
        assert closed_within(extra, IDLE_S - SLACK_S)
        extra.close()
        assert capped.metric(REFUSED, reason="connection cap") == before + 1
        for _ in range(5):
            started = time.monotonic()
            assert httpx.get(f"{capped.metrics_url}/health", timeout=5).status_code == 200
            assert time.monotonic() - started < 0.5
        held.pop().close()
        settle(capped, CAP - 1)
        owner = unique("after-cap")
        with connect_from("127.0.0.6", capped.port) as sender:
            sender.sendall(message(owner, "a place was free"))
        assert [item["content"] for item in found(api, owner, 1)] == ["a place was free"]
    finally:
        for sock in held:
            sock.close()


@pytest.mark.slow
def test_silent_connections_are_closed_after_the_idle_timeout(
    capped: RunningSyslog, api: httpx.Client
) -> None:
    settle(capped, 0)
    before = capped.metric(IDLE_CLOSED)
    silent = [
        connect_from("127.0.0.7", capped.port),
        connect_from("127.0.0.7", capped.tls_port),  # a handshake that never comes
        connect_from("127.0.0.7", capped.relp_port),
    ]
    owner = unique("talking")
    talking = connect_from("127.0.0.8", capped.port)
    started = time.monotonic()
    closed_after: dict[int, float] = {}
    sent = 0
    try:
        # The talking sender sends a message every third of the idle timeout, for two idle
        # timeouts; the silent ones are watched meanwhile.
        while time.monotonic() - started < 2 * IDLE_S:
            talking.sendall(message(owner, f"message {sent}"))
            sent += 1
            pause_until = started + sent * IDLE_S / 3
            while (left := pause_until - time.monotonic()) > 0:
                watched = [sock for sock in silent if sock.fileno() not in closed_after]
                readable, _, _ = select.select(watched, [], [], left)
                for sock in readable:
                    if closed_within(sock, 0):
                        closed_after[sock.fileno()] = time.monotonic() - started
                if not readable:
                    break
        assert sorted(closed_after) == sorted(sock.fileno() for sock in silent)
        assert all(IDLE_S - 0.1 <= after <= IDLE_S + SLACK_S for after in closed_after.values())
        assert not closed_within(talking, 0)
        assert capped.metric(IDLE_CLOSED) == before + len(silent)
    finally:
        for sock in [*silent, talking]:
            sock.close()
    stored = found(api, owner, sent)
    assert sorted(item["content"] for item in stored) == sorted(f"message {n}" for n in range(sent))
