"""Audit requests through the router, as the statement reports (bench/pgbadger) and the
client grid (bench/grid) send them: writes of a given number of rows, one-page searches of
one owner's recent hour, each timed; a request answered with anything but 200 ends the run."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from datetime import timedelta

import httpx
import orjson

from bench.harness import Progress
from router import clock

CONTENT = "user {n} logged in from 10.0.{a}.{b} session {n:08x}"
Request = Callable[[httpx.AsyncClient, int], Awaitable[None]]


def audit_body(owner: str, rows: int, first: int) -> bytes:
    """NDJSON of ``rows`` audit records of ``owner`` stamped now, numbered from ``first``."""
    stamp = clock.now().isoformat()
    return b"".join(
        orjson.dumps(
            {
                "owner": owner,
                "ts": stamp,
                "content": CONTENT.format(n=n, a=n % 256, b=n // 256 % 256),
            }
        )
        + b"\n"
        for n in range(first, first + rows)
    )


def recent_window() -> dict[str, str]:
    """The last hour up to a minute ahead, cut at midnight: one day table per shard, so one
    statement shape per search."""
    now = clock.now()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return {
        "from": max(now - timedelta(hours=1), midnight).isoformat(),
        "to": (now + timedelta(minutes=1)).isoformat(),
    }


def writer(owners: list[str], rows: int) -> Request:
    """Request ``n`` posts ``rows`` rows of one of ``owners`` (in turn)."""

    async def write(http: httpx.AsyncClient, n: int) -> None:
        body = audit_body(owners[n % len(owners)], rows, n * rows)
        response = await http.post(
            "/v1/audit", content=body, headers={"content-type": "application/x-ndjson"}
        )
        if response.status_code != 200:
            raise RuntimeError(f"write: {response.status_code} {response.text[:300]}")

    return write


def searcher(owners: list[str], limit: int = 100) -> Request:
    """Request ``n`` reads the first page of one of ``owners``' recent hour (no count)."""

    async def search(http: httpx.AsyncClient, n: int) -> None:
        params: dict[str, str | int] = {
            "owner": owners[n % len(owners)],
            "limit": limit,
            **recent_window(),
        }
        response = await http.get("/v1/audit/search", params=params)
        if response.status_code != 200:
            raise RuntimeError(f"search: {response.status_code} {response.text[:300]}")

    return search


async def send_count(
    http: httpx.AsyncClient, request: Request, count: int, clients: int, label: str
) -> None:
    """Exactly ``count`` requests from ``clients`` concurrent clients."""
    progress = Progress(label, count, unit="requests")
    numbers = iter(range(count))

    async def client() -> None:
        for n in numbers:
            await request(http, n)
            progress.advance()

    await asyncio.gather(*(client() for _ in range(clients)))


async def send_for(
    http: httpx.AsyncClient,
    request: Request,
    seconds: float,
    clients: int,
    label: str,
    pace_s: float = 0.0,
) -> list[float]:
    """Requests from ``clients`` concurrent clients for ``seconds``; the seconds each took.
    ``pace_s``: each client starts a request at most every ``pace_s`` seconds."""
    progress = Progress(label, max(round(seconds), 1), unit="s")
    deadline = time.perf_counter() + seconds
    numbers = itertools.count()
    latencies: list[float] = []

    async def client() -> None:
        while (started := time.perf_counter()) < deadline:
            await request(http, next(numbers))
            finished = time.perf_counter()
            latencies.append(finished - started)
            if pace_s:
                await asyncio.sleep(max(0.0, started + pace_s - finished))

    async def tick() -> None:
        while (left := deadline - time.perf_counter()) > 0:
            await asyncio.sleep(min(1.0, left))
            progress.advance()

    await asyncio.gather(tick(), *(client() for _ in range(clients)))
    return latencies
