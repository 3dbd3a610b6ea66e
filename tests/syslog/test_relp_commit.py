"""RELP's "answered after the commit" when the commit cannot happen (router/syslogd/
relp_server.py): with the database down, a session's messages get no ``200 OK`` while the
listener's writes keep failing; once the database is back each is stored once, and answered
only then, in order. A session its client drops before the commit stays unanswered; its
messages, queued already, are stored once when the database returns (a sender that sends
them again on a new session stores them again: RELP's promise is at least once, never an
answer without a commit).

The database is really down: this module's own cluster (the catalog and one shard, so that
no other shard can take the writes) has its shard stopped by the launcher, and its own
listener writes to it. Spoken by a raw RELP client, which decides when a session ends, and by
rsyslog's omrelp as docs/operations.md configures it."""

from __future__ import annotations

import re
import socket
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import NamedTuple

import pytest

from router import clock
from router.auth.scopes import SYSTEM_TENANT
from router.settings import Settings
from services.cluster import LocalCluster
from services.postgres import PostgresInstance
from tests.support import cluster_of_its_own, eventually, run_cli
from tests.syslog.platform import RunningSyslog
from tests.syslog.rsyslog import Rsyslog

OFFERS = b"relp_version=0\nrelp_software=shardlog-tests\ncommands=syslog"
MESSAGES = 20
# The writer retries every second (router/syslogd/writer.py): two failed commits show it
# took the messages (the first batch of them) and could not store them.
FAILED_WRITES = 2
FAILED = "shardlog_ingest_batches_total"


@pytest.fixture(scope="module")
def own_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Settings, LocalCluster]]:
    """The catalog and one shard in one group, for this module only; 127.0.0.1 (the tests'
    RELP client) mapped to the system tenant."""
    root: Path = tmp_path_factory.mktemp("relp-commit")
    with cluster_of_its_own(root, shards=1, groups=1) as (own, cluster):
        mapped = run_cli(own, "syslog-senders", "set", "127.0.0.1", "--tenant", SYSTEM_TENANT)
        assert mapped.returncode == 0, mapped.stderr
        yield own, cluster


@pytest.fixture(scope="module")
def own_listener(
    own_cluster: tuple[Settings, LocalCluster],
    syslog_ports: Iterator[int],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RunningSyslog]:
    own, _ = own_cluster
    home = tmp_path_factory.mktemp("relp-commit-listener")
    with RunningSyslog(home, own, syslog_ports).running() as process:
        yield process


class Platform(NamedTuple):
    cluster: LocalCluster
    listener: RunningSyslog
    shard: PostgresInstance


@pytest.fixture
def platform(
    own_cluster: tuple[Settings, LocalCluster], own_listener: RunningSyslog
) -> Iterator[Platform]:
    """The module's cluster, listener and shard; the shard running again after the test
    whatever it did."""
    _, cluster = own_cluster
    (shard,) = cluster.shards
    yield Platform(cluster, own_listener, shard)
    shard.start()


class RelpClient:
    """A RELP session on a plain socket: commands sent when the test says, answers (``rsp``
    frames) parsed as they come, the connection closed when the test says."""

    def __init__(self, port: int) -> None:
        self.socket = socket.create_connection(("127.0.0.1", port), timeout=10)
        self._received = b""
        self.answers: dict[int, bytes] = {}
        self.order: list[int] = []  # the txnrs answered, as they came

    def send(self, txnr: int, command: bytes, data: bytes = b"") -> None:
        head = b"%d %s %d" % (txnr, command, len(data))
        self.socket.sendall(head + (b" " + data if data else b"") + b"\n")

    def open(self) -> None:
        self.send(1, b"open", OFFERS)
        self.wait_for(1)
        assert self.answers[1].startswith(b"200 OK"), self.answers[1]

    def read(self, timeout: float) -> None:
        """What came within ``timeout`` (none: nothing waits), parsed."""
        self.socket.settimeout(timeout)
        try:
            chunk = self.socket.recv(65536)
        except (TimeoutError, BlockingIOError):
            return
        assert chunk, "the listener closed the session"
        self._received += chunk
        while frame := _RSP.match(self._received):
            size = int(frame["size"])
            start = frame.end() + (1 if size else 0)
            if len(self._received) < start + size + 1:
                break
            self.answers[int(frame["txnr"])] = self._received[start : start + size]
            self.order.append(int(frame["txnr"]))
            self._received = self._received[start + size + 1 :]

    def wait_for(self, *txnrs: int, timeout: float = 30.0) -> None:
        eventually(lambda: self.read(0.1) or set(txnrs) <= self.answers.keys(), timeout, 0)

    def close(self) -> None:
        self.socket.close()


_RSP = re.compile(rb"(?P<txnr>[0-9]+) rsp (?P<size>[0-9]+)")


def _message(owner: str, stamp: str, n: int) -> bytes:
    return f'<13>1 {stamp} web-7 relp - - [shardlog@32473 owner="{owner}"] message {n}'.encode()


def _stamp() -> str:
    """One timestamp for every message of a test (a minute ago): one day table, whatever the
    hour."""
    at = clock.now() - timedelta(minutes=1)
    return at.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _stored(platform: Platform, owner: str) -> Counter[str]:
    """The owner's messages as the shard holds them, read there (not through the listener)."""
    owner_id = platform.cluster.metadata.psql(
        "shardlog", f"SELECT id FROM owners WHERE kind = 'audit' AND key = '{owner}'"
    ).strip()
    if not owner_id:
        return Counter()
    shard = platform.shard
    tables = shard.psql(
        "shardlog",
        f"SELECT tablename FROM pg_tables WHERE tablename ~ '^audit_o{owner_id}_[0-9]{{8}}$'",
    ).split()
    if not tables:
        return Counter()
    union = " UNION ALL ".join(f'SELECT content FROM "{table}"' for table in tables)
    return Counter(shard.psql("shardlog", union).splitlines())


def _failed_writes(platform: Platform) -> float:
    shard = platform.shard.spec.name
    return platform.listener.metric(FAILED, kind="audit", shard=shard, outcome="failed")


def _writes_failing(platform: Platform, before: float) -> None:
    """Until the listener failed FAILED_WRITES times to commit what it took from its queue:
    a sign that the write was tried, not a guess at a delay."""
    eventually(lambda: _failed_writes(platform) >= before + FAILED_WRITES or None, 30, 0.05)


def _expected(count: int = MESSAGES) -> Counter[str]:
    return Counter(f"message {n}" for n in range(count)) + Counter({"message -1": 1})


def _unanswered_while_down(client: RelpClient, platform: Platform, owner: str) -> list[int]:
    """An open session's first message stored and answered; then, with the shard stopped,
    MESSAGES more sent and none of them answered while the listener's commits fail. Their
    txnrs."""
    stamp = _stamp()
    client.open()
    # The day table is made while the shard is up: the commits that fail below are the
    # messages' own.
    client.send(2, b"syslog", _message(owner, stamp, -1))
    client.wait_for(2)
    before = _failed_writes(platform)
    platform.shard.stop()
    txnrs = list(range(3, 3 + MESSAGES))
    for n, txnr in enumerate(txnrs):
        client.send(txnr, b"syslog", _message(owner, stamp, n))
    _writes_failing(platform, before)
    client.read(0.2)
    assert sorted(client.answers) == [1, 2], client.answers
    return txnrs


@pytest.fixture
def client(own_listener: RunningSyslog) -> Iterator[RelpClient]:
    """A session with the module's listener, closed at the end unless the test did."""
    session = RelpClient(own_listener.relp_port)
    yield session
    session.close()


def test_no_answer_while_the_database_is_down_then_each_stored_once_and_answered(
    platform: Platform, client: RelpClient
) -> None:
    owner = f"relp-down-{uuid.uuid4().hex[:8]}"
    txnrs = _unanswered_while_down(client, platform, owner)
    platform.shard.start()
    client.wait_for(*txnrs)
    # Answered after the commit: every message is there once the last answer came.
    assert _stored(platform, owner) == _expected()
    assert [client.answers[t] for t in txnrs] == [b"200 OK"] * MESSAGES
    assert client.order == [1, 2, *txnrs]
    client.send(txnrs[-1] + 1, b"close")
    client.wait_for(txnrs[-1] + 1)


def test_a_session_dropped_before_the_commit_is_never_answered_and_stored_once(
    platform: Platform, client: RelpClient
) -> None:
    owner = f"relp-dropped-{uuid.uuid4().hex[:8]}"
    _unanswered_while_down(client, platform, owner)
    client.close()
    platform.shard.start()
    # The queued batch commits with the shard back; its answers have nowhere to go.
    eventually(lambda: _stored(platform, owner) == _expected() or None, 30, 0.2)
    # The listener goes on: a new session is answered after its commit.
    again = RelpClient(platform.listener.relp_port)
    try:
        again.open()
        again.send(2, b"syslog", _message(owner, _stamp(), MESSAGES))
        again.wait_for(2)
        assert again.answers[2] == b"200 OK"
    finally:
        again.close()
    assert _stored(platform, owner) == _expected(MESSAGES + 1)


def test_rsyslog_forwards_through_the_outage_and_each_message_is_stored_once(
    platform: Platform, syslog_ports: Iterator[int], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """omrelp as docs/operations.md configures it: its messages wait for their answers while
    the shard is down (shorter than omrelp's timeout: nothing is sent again), then each is
    stored once."""
    owner, stamp = f"relp-rsyslog-{uuid.uuid4().hex[:8]}", _stamp()
    home = tmp_path_factory.mktemp("rsyslog-outage")
    forwarder = Rsyslog(home, {"relp": next(syslog_ports)}, platform.listener)
    forwarder.start()
    try:
        # rsyslog's forward format carries the owner as the tag.
        forwarded = [
            f"<38>1 {stamp} web-7 {owner} 77 - - message {n}".encode()
            for n in range(-1, MESSAGES + 1)
        ]
        forwarder.send("relp", forwarded[:1])
        eventually(lambda: _stored(platform, owner) == _expected(0) or None, 30, 0.2)
        before = _failed_writes(platform)
        platform.shard.stop()
        forwarder.send("relp", forwarded[1:-1])
        _writes_failing(platform, before)
        platform.shard.start()
        # A sentinel after them on the same action: a copy sent again would come before it.
        forwarder.send("relp", forwarded[-1:])
        eventually(lambda: _stored(platform, owner)[f"message {MESSAGES}"] or None, 30, 0.2)
        assert _stored(platform, owner) == _expected(MESSAGES + 1)
    finally:
        output = forwarder.stop()
    unexpected = [line for line in output.splitlines() if "error" in line]
    assert not unexpected, output
