"""The subscribers of bench/tail, in processes of their own (spawned: a module, not
__main__, so that they can import it)."""

from __future__ import annotations

import asyncio
import resource
import urllib.parse
from datetime import datetime
from typing import Any

import orjson

from router import clock

OWNERS = 500
_ROW = b'data: {"ts"'


def _first_row_lag(text: bytes) -> float | None:
    """Arrival minus the ts of the first whole row of ``text`` (the writer set ts just before
    sending; the first row of a read waited longest: an upper bound of the read's lags)."""
    start = text.find(_ROW)
    end = text.find(b"\n", start)
    if start < 0 or end < 0:
        return None
    ts = orjson.loads(text[start + 6 : end])["ts"]
    return clock.time() - datetime.fromisoformat(ts).timestamp()


def owner(n: int) -> str:
    return f"tail-bench-{n:04d}"


def subscription_params(n: int) -> list[tuple[str, str]]:
    """Various filters: one owner; one owner and a pattern; an owner prefix and a pattern;
    two owners."""
    kind = n % 4
    if kind == 0:
        return [("owner", owner(n % OWNERS))]
    if kind == 1:
        return [("owner", owner(n % OWNERS)), ("q", "denied")]
    if kind == 2:
        return [("owner_prefix", owner(n % OWNERS)[:-1]), ("q", f"user{n % 97} denied")]
    return [("owner", owner(n % OWNERS)), ("owner", owner((n + 1) % OWNERS))]


def subscribers_process(
    url: str, header: str, indexes: list[int], ready: Any, stop: Any, out: Any
) -> None:
    """Tail streams on raw sockets; reports rows received and arrival lags (arrival minus the
    row's ts, which the writer set just before sending)."""

    async def one(index: int, counts: list[int], lags: list[float]) -> None:
        parsed = urllib.parse.urlsplit(url)
        reader, writer = await asyncio.open_connection(parsed.hostname, parsed.port)
        query = urllib.parse.urlencode(subscription_params(index))
        writer.write(
            f"GET /v1/audit/tail?{query} HTTP/1.1\r\nHost: x\r\nAuthorization: {header}\r\n"
            "Accept: text/event-stream\r\n\r\n".encode()
        )
        await writer.drain()
        # Chunks, not lines: a subscriber shares the router's two cores here, and reading
        # line by line in Python costs it more than the router spends sending.
        subscribed = False
        head = b""
        carry = b""
        chunks = 0
        while True:
            chunk = await reader.read(1 << 16)
            if not chunk:
                return
            text = carry + chunk
            if not subscribed:
                head += chunk
            if not subscribed and b"event: subscribed" in head:
                subscribed = True
                counts[1] += 1
                if counts[1] == len(indexes):
                    everyone.set()
            counts[0] += text.count(_ROW)
            chunks += 1
            if chunks % 7 == 0:
                lag = _first_row_lag(text)
                if lag is not None:
                    lags.append(lag)
            # A row marker split across two reads is counted once, in the next.
            cut = max(len(text) - len(_ROW) + 1, 0)
            counted_to = text.rfind(_ROW) + len(_ROW) if _ROW in text else 0
            carry = text[max(cut, counted_to) :]

    everyone = asyncio.Event()

    async def run() -> None:
        counts = [0, 0]
        lags: list[float] = []
        tasks = [asyncio.create_task(one(i, counts, lags)) for i in indexes]
        await everyone.wait()
        ready.set()
        await asyncio.to_thread(stop.wait)
        for task in tasks:
            task.cancel()
        out.put({"rows": counts[0], "lags": lags})

    asyncio.run(run())


def one_owner_process(
    url: str, header: str, owner_key: str, count: int, ready: Any, stop: Any, rows: Any
) -> None:
    """``count`` tail streams of one owner on raw sockets; ``rows`` (a shared integer) counts
    the rows they received, all together, as they come."""
    raise_open_files_limit()
    parsed = urllib.parse.urlsplit(url)
    request = (
        f"GET /v1/audit/tail?owner={owner_key} HTTP/1.1\r\nHost: x\r\nAuthorization: {header}"
        "\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()
    subscribed = [0]
    everyone = asyncio.Event()

    async def one() -> None:
        reader, writer = await asyncio.open_connection(parsed.hostname, parsed.port)
        writer.write(request)
        carry = b""
        while chunk := await reader.read(1 << 16):
            text = carry + chunk
            if b"event: subscribed" in text and b"event: subscribed" not in carry:
                subscribed[0] += 1
                if subscribed[0] == count:
                    everyone.set()
            # A row marker split across two reads is counted once, in the next.
            cut = max(len(text) - len(_ROW) + 1, 0)
            counted_to = text.rfind(_ROW) + len(_ROW) if _ROW in text else 0
            rows.value += text[: max(cut, counted_to)].count(_ROW)
            carry = text[max(cut, counted_to) :]

    async def run() -> None:
        tasks = [asyncio.create_task(one()) for _ in range(count)]
        await everyone.wait()
        ready.set()
        await asyncio.to_thread(stop.wait)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(run())


def raise_open_files_limit() -> None:
    """A socket per stream: the soft limit of open files up to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
