"""The subscribers of bench/tail, in processes of their own (spawned: a module, not
__main__, so that they can import it)."""

from __future__ import annotations

import asyncio
import time
import urllib.parse
from datetime import datetime
from typing import Any

import orjson

OWNERS = 500


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
        subscribed = False
        while True:
            line = await reader.readline()
            if not line:
                return
            if line.startswith(b"event: subscribed") and not subscribed:
                subscribed = True
                counts[1] += 1
                if counts[1] == len(indexes):
                    everyone.set()
            elif line.startswith(b'data: {"ts"'):
                counts[0] += 1
                if counts[0] % 7 == 0:
                    ts = datetime.fromisoformat(orjson.loads(line[6:])["ts"]).timestamp()
                    lags.append(time.time() - ts)

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
