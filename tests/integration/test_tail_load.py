"""Many live-tail subscribers on one owner (issue 35, item 10): a write does not wait for them
(their rows are ordered and rendered in turns, router/tail/pacing.py), every subscriber gets
every row once, and one that stops reading is cut with a cursor that resumes it exactly once.
"""

from __future__ import annotations

import asyncio
import functools
import multiprocessing
import statistics
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import orjson
import pytest

from router import clock
from router.settings import Settings
from services.cluster import LocalCluster
from services.router_process import RouterProcess
from tests.support import another_router, eventually, running_router
from tests.tail_client import TailClient, settled

SUBSCRIBERS = 200
WRITES = 20
ROWS = 50
CAPACITY = 400
KEPT = 3
# Writes of 1,000 rows that only the stalled stream wants.
STALLED_BULK = 6
# A row's event (an item starts with its ts; the `subscribed` event's data does not).
_ROW = b'\ndata: {"ts"'


@pytest.fixture(scope="module")
def tail_router(
    settings: Settings, cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RouterProcess]:
    """A router of its own: the subscribers' load stays off the session router."""
    env = {
        "SHARDLOG_TAIL__WATERMARK_S": "0.1",
        "SHARDLOG_TAIL__MAX_BUFFERED_EVENTS": str(CAPACITY),
    }
    with running_router(another_router(settings, tmp_path_factory.mktemp("tail-load"), env)) as r:
        yield r


def _body(owner: str, tag: str, rows: int) -> bytes:
    # Row times well inside the accepted window whatever the hour (a second ago).
    at = clock.now() - timedelta(seconds=1)
    return b"".join(
        orjson.dumps(
            {
                "owner": owner,
                "ts": (at + timedelta(microseconds=n)).isoformat(),
                "content": f"{tag} {n}",
            }
        )
        + b"\n"
        for n in range(rows)
    )


def _write(client: httpx.Client, owner: str, tag: str, rows: int = ROWS) -> None:
    response = client.post(
        "/v1/audit",
        content=_body(owner, tag, rows),
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.status_code == 200, response.text


def _timed_writes(
    client: httpx.Client, owner: str, tag: str, subscribers: Subscribers | None = None
) -> list[float]:
    """WRITES writes of ROWS rows, each timed. With ``subscribers``, a write starts once they
    have every row of the writes before the last: one write's streaming overlaps the next
    write, and no subscriber that keeps up falls further behind."""
    took = []
    for n in range(WRITES):
        if subscribers is not None:
            eventually(functools.partial(subscribers.have, max(0, n - 1) * ROWS), 60, 0.002)
        started = time.perf_counter()
        _write(client, owner, f"{tag}{n}")
        took.append(time.perf_counter() - started)
    return took


class Subscribers:
    """SUBSCRIBERS streams on raw sockets, read in a process of their own (the timed writes
    share no interpreter with them): rows counted per stream, every row's content kept for
    the first KEPT streams."""

    def __init__(self, router: RouterProcess, token: str, owner: str) -> None:
        context = multiprocessing.get_context("spawn")
        self.rows = context.Array("q", SUBSCRIBERS, lock=False)
        self.subscribed = context.Value("q", 0, lock=False)
        self._stop = context.Event()
        self._contents, sending = context.Pipe(duplex=False)
        self._process = context.Process(
            target=_subscribe,
            args=(router.url, token, owner, self.rows, self.subscribed, self._stop, sending),
            daemon=True,
        )

    def __enter__(self) -> Subscribers:
        self._process.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._process.join(timeout=30)
        if self._process.is_alive():
            self._process.kill()

    def least(self) -> int:
        return int(min(self.rows))

    def have(self, rows: int) -> bool | None:
        """Whether every stream has ``rows`` rows."""
        return self.least() >= rows or None

    def contents(self) -> list[list[str]]:
        """The kept streams' rows (once, after they stopped)."""
        self._stop.set()
        found: list[list[str]] = self._contents.recv()
        return found


def _subscribe(
    url: str, token: str, owner: str, rows: Any, subscribed: Any, stop: Any, contents: Any
) -> None:
    address = urllib.parse.urlsplit(url)
    request = (
        f"GET /v1/audit/tail?owner={owner} HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()
    kept: list[list[str]] = [[] for _ in range(KEPT)]

    async def one(index: int) -> None:
        reader, writer = await asyncio.open_connection(address.hostname, address.port)
        try:
            writer.write(request)
            carry = b""
            while chunk := await reader.read(1 << 16):
                text = carry + chunk
                if b"event: subscribed" in text and b"event: subscribed" not in carry:
                    subscribed.value += 1
                # Whole lines only (``whole`` starts a line); a line cut by the read waits for
                # the next one.
                cut = text.rfind(b"\n") + 1
                whole, carry = text[:cut], text[cut:]
                rows[index] += (b"\n" + whole).count(_ROW)
                if index < KEPT:
                    for line in whole.split(b"\n"):
                        if line.startswith(_ROW[1:]):
                            kept[index].append(orjson.loads(line[6:])["content"])
        finally:
            writer.close()

    async def main() -> None:
        streams = [asyncio.create_task(one(i)) for i in range(SUBSCRIBERS)]
        await asyncio.to_thread(stop.wait)
        for stream in streams:
            stream.cancel()
        await asyncio.gather(*streams, return_exceptions=True)

    asyncio.run(main())
    contents.send(kept)


def test_writes_do_not_wait_for_subscribers_and_a_stalled_one_resumes_exactly_once(
    tail_router: RouterProcess, api_token: str
) -> None:
    stem = f"tail-load-{uuid.uuid4().hex[:10]}"
    owner, other = f"{stem}-a", f"{stem}-b"
    expected = sorted(f"w{w} {n}" for w in range(WRITES) for n in range(ROWS))
    with httpx.Client(base_url=tail_router.url, timeout=60) as client:
        client.headers["Authorization"] = f"Bearer {api_token}"
        _timed_writes(client, owner, "warm-up")
        alone = _timed_writes(client, owner, "alone")
        # The stalled stream also covers ``other``, whose rows only it wants: more than the
        # kernel's socket buffers and CAPACITY together, at little cost to the router.
        stalled = TailClient(
            tail_router.url,
            "/v1/audit/tail",
            {"owner_prefix": stem},
            api_token,
            receive_buffer=4096,
        ).start()
        stalled.subscribed()
        stalled.pause_reading()
        with Subscribers(tail_router, api_token, owner) as subscribers:
            eventually(lambda: subscribers.subscribed.value == SUBSCRIBERS or None, 60)
            watched = _timed_writes(client, owner, "w", subscribers)
            eventually(lambda: subscribers.least() >= WRITES * ROWS or None, 60)
            # A sentinel row after them: a late duplicate of theirs would come before it.
            _write(client, owner, "sentinel-a", 1)
            eventually(lambda: subscribers.least() >= WRITES * ROWS + 1 or None, 60)
            # Nothing more came: every row once.
            assert list(subscribers.rows) == [WRITES * ROWS + 1] * SUBSCRIBERS
            with_sentinel = sorted([*expected, "sentinel-a 0"])
            assert all(sorted(c) == with_sentinel for c in subscribers.contents())
        bulk = [f"bulk{b} {n}" for b in range(STALLED_BULK) for n in range(1000)]
        for b in range(STALLED_BULK):
            _write(client, other, f"bulk{b}", 1000)
    # Without the turns a write waited for every stream's ordering and rendering of the
    # previous write's rows: 191 ms for 3.4 ms alone (median) here; with them, 11 ms for 1.8.
    # The bound leaves room for the subscribers' share of two busy cores.
    assert statistics.median(watched) <= 4 * statistics.median(alone) + 0.02, (alone, watched)
    # The stalled stream held at most CAPACITY rows and was cut; its cursor resumes it.
    stalled.resume_reading()
    stalled.wait(lambda c: bool(c.of("overflow")) and c.closed.is_set())
    kept = [r["content"] for r in stalled.rows()]
    cursor = stalled.of("overflow")[0].id
    assert cursor
    total = WRITES * ROWS + 1 + len(bulk)
    resumed = TailClient(
        tail_router.url, "/v1/audit/tail", {"owner_prefix": stem, "after": cursor}, api_token
    )
    with resumed.start(), httpx.Client(base_url=tail_router.url, timeout=60) as client:
        client.headers["Authorization"] = f"Bearer {api_token}"
        resumed.subscribed()
        resumed.wait(lambda c: len(kept) + len(c.rows()) >= total, 60)
        rows = settled(
            resumed,
            lambda: _write(client, other, "sentinel-b", 1),
            lambda row: row["content"] == "sentinel-b 0",
        )
    got = kept + [r["content"] for r in rows]
    assert sorted(got) == sorted([*expected, "sentinel-a 0", *bulk])
