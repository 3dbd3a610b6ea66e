"""A tail's exactly-once promise across routers: a stream opened on one router, cut off after
part of a known set of rows (written in several parts, through both routers, to several
shards), resumed with its Last-Event-ID on another router while writes go on, receives exactly
the rest: no row missing, none twice, also after the last expected row (until a sentinel
written after them has come). For the audit tail and the flows tail."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, NamedTuple

import httpx
import orjson
import pytest

from router import clock
from router.settings import Settings
from services.cluster import LocalCluster
from services.router_process import RouterProcess
from tests.support import another_router, bearer, running_router
from tests.tail_client import TailClient, settled

KEYS = 4  # owners (switches) under the stream's prefix: their rows go to several shards
ROWS = 20  # per write
PARTS = 3  # writes per part of the known set
PARAM = {"audit": "owner_prefix", "flows": "switch_prefix"}
SENTINEL_PORT = 65535
# Where a stream is cut (its ``limit``): inside the first part of ROWS * PARTS rows.
CUT = ROWS + 5


@pytest.fixture(scope="module")
def router_b(
    settings: Settings, cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RouterProcess]:
    """A second router on the session's catalog and shards."""
    env = {"SHARDLOG_TAIL__WATERMARK_S": "0.3"}
    home = tmp_path_factory.mktemp("tail-routers")
    with running_router(another_router(settings, home, env)) as router:
        yield router


@pytest.fixture(scope="module")
def client_b(router_b: RouterProcess, api_token: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=router_b.url, headers=bearer(api_token), timeout=30) as client:
        yield client


def _records(kind: str, stem: str, tag: int, count: int) -> list[dict[str, Any]]:
    """``count`` rows dealt over the stem's keys, each its own (an audit row's content, a
    flow's source address and port: ``tag`` and its number), timed a second ago."""
    at = clock.now() - timedelta(seconds=1)
    out = []
    for n in range(count):
        ts = (at + timedelta(microseconds=n)).isoformat()
        key = f"{stem}-{n % KEYS}"
        if kind == "audit":
            out.append({"owner": key, "ts": ts, "content": f"{tag} {n}"})
        else:
            out.append(
                {
                    "switch": key,
                    "ts": ts,
                    "src_ip": f"10.77.{tag}.{n % 250}",
                    "dst_ip": "192.0.2.7",
                    "src_port": 1000 + n,
                    "dst_port": 443,
                    "proto": 6,
                    "bytes": 100,
                }
            )
    return out


def _identity(kind: str, row: dict[str, Any]) -> str:
    if kind == "audit":
        return str(row["content"])
    return f"{row['src_ip']}:{row['src_port']}"


def _post(client: httpx.Client, kind: str, records: list[dict[str, Any]]) -> None:
    body = b"".join(orjson.dumps(r) + b"\n" for r in records)
    answer = client.post(
        f"/v1/{kind}", content=body, headers={"content-type": "application/x-ndjson"}
    )
    assert answer.status_code == 200, answer.text


class KnownSet:
    """The rows a test writes, part after part, and who wrote them."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.stem = f"xr-{kind}-{uuid.uuid4().hex[:8]}"
        self.expected: list[str] = []
        self._tags = iter(range(1, 250))

    def write(self, clients: list[httpx.Client]) -> None:
        """One part: PARTS writes of ROWS rows, taking turns over ``clients``."""
        for n in range(PARTS):
            records = _records(self.kind, self.stem, next(self._tags), ROWS)
            _post(clients[n % len(clients)], self.kind, records)
            self.expected += [_identity(self.kind, r) for r in records]

    def sentinel(self, client: httpx.Client) -> Callable[[], None]:
        def write() -> None:
            record = _records(self.kind, self.stem, 0, 1)[0]
            if self.kind == "audit":
                record["content"] = "sentinel"
            else:
                record["src_port"] = SENTINEL_PORT
            _post(client, self.kind, [record])

        return write

    def is_sentinel(self, row: dict[str, Any]) -> bool:
        if self.kind == "audit":
            return bool(row["content"] == "sentinel")
        return bool(row["src_port"] == SENTINEL_PORT)


class Routers(NamedTuple):
    a: RouterProcess
    b: RouterProcess
    # A client of each, writing with the token the streams read with.
    client_a: httpx.Client
    client_b: httpx.Client
    token: str


@pytest.fixture
def routers(
    router_process: RouterProcess,
    router_b: RouterProcess,
    api: httpx.Client,
    client_b: httpx.Client,
    api_token: str,
) -> Routers:
    return Routers(router_process, router_b, api, client_b, api_token)


@pytest.fixture(params=["audit", "flows"])
def known(request: pytest.FixtureRequest) -> KnownSet:
    return KnownSet(request.param)


def _stream(
    router: RouterProcess, known: KnownSet, token: str, cursor: str | None, limit: int = 0
) -> TailClient:
    """A stream of the known set's keys (resumed from ``cursor``, if any; ended by the router
    after ``limit`` rows, if any)."""
    params: dict[str, Any] = {PARAM[known.kind]: known.stem}
    if limit:
        params["limit"] = limit
    return TailClient(router.url, f"/v1/{known.kind}/tail", params, token, cursor)


def _rest_while_writing(
    router: RouterProcess, known: KnownSet, routers: Routers, cursor: str, had: int
) -> list[dict[str, Any]]:
    """The stream resumed on ``router`` while the last part is written (during its catch-up
    and after it went live): the rows it sends, ``had`` rows having come before, up to a
    sentinel written after them."""
    clients = [routers.client_a, routers.client_b]
    during = threading.Thread(target=known.write, args=(clients,))
    during.start()
    with _stream(router, known, routers.token, cursor).start() as again:
        again.subscribed()
        during.join()
        again.wait(lambda c: had + len(c.rows()) >= len(known.expected), 30)
        return settled(again, known.sentinel(routers.client_a), known.is_sentinel)


def _each_once(known: KnownSet, rows: list[dict[str, Any]]) -> None:
    got = Counter(_identity(known.kind, row) for row in rows)
    twice = [identity for identity, times in got.items() if times > 1]
    assert not twice, f"sent twice: {twice[:10]}"
    assert sorted(got) == sorted(known.expected)


def test_a_resume_on_another_router_sends_exactly_the_rest(
    known: KnownSet, routers: Routers
) -> None:
    clients = [routers.client_a, routers.client_b]
    # Router A: the first part, through both routers; the stream is cut after part of it.
    with _stream(routers.a, known, routers.token, None).start() as first:
        first.subscribed()
        known.write(clients)
        first.wait(lambda c: len(c.rows()) >= ROWS)
        first.drop()
    kept = first.rows()
    cursor = first.parser.last_id
    assert cursor is not None
    # While no stream is open: the second part.
    known.write(clients[::-1])
    resumed = _rest_while_writing(routers.b, known, routers, cursor, len(kept))
    _each_once(known, kept + resumed)
    assert len(kept) < len(known.expected), "the first stream had every row: none resumed"
    # Rows of several shards, so the cursor carried more than one shard's position.
    assert len({row["shard"] for row in kept + resumed}) >= 2


def _cut(
    router: RouterProcess,
    known: KnownSet,
    token: str,
    cursor: str | None,
    then: Callable[[], None] = lambda: None,
) -> tuple[list[dict[str, Any]], str]:
    """A stream (resumed from ``cursor``, if any) that the router ends after CUT rows, ``then``
    done once it subscribed: its rows and its last cursor."""
    with _stream(router, known, token, cursor, CUT).start() as tail:
        tail.subscribed()
        then()
        tail.wait(lambda c: c.closed.is_set())
    assert len(tail.rows()) == CUT
    assert tail.parser.last_id is not None
    return tail.rows(), tail.parser.last_id


def test_a_stream_cut_twice_hops_between_routers_without_loss_or_repeat(
    known: KnownSet, routers: Routers
) -> None:
    """Cut at exact rows (``limit``): on router A in the middle of the first part, on router B
    in the middle of its catch-up (its cursor carries what that catch-up sent), then resumed on
    A again while the last part is written."""
    clients = [routers.client_a, routers.client_b]
    on_a, cursor = _cut(routers.a, known, routers.token, None, lambda: known.write(clients))
    known.write(clients[::-1])
    on_b, cursor = _cut(routers.b, known, routers.token, cursor)
    back_on_a = _rest_while_writing(routers.a, known, routers, cursor, len(on_a) + len(on_b))
    _each_once(known, on_a + on_b + back_on_a)
