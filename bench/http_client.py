"""A benchmark's HTTP client where client CPU would distort the figures: the clients share the
machine's two cores with the router and the shards."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from urllib.parse import urlencode, urlsplit


class LeanClient:
    """One keep-alive HTTP/1.1 connection with as little client CPU per request as can be
    (the clients share the 2 cores with the router and the shards): the request bytes made
    once, the answer read by its Content-Length."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        self._headers = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    def request(self, path: str, body: bytes, content_type: str) -> bytes:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self._host}\r\n{self._headers}"
            f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body

    def get(self, path: str, params: Mapping[str, str | int]) -> bytes:
        target = f"{path}?{urlencode(params)}" if params else path
        return f"GET {target} HTTP/1.1\r\nHost: {self._host}\r\n{self._headers}\r\n".encode()

    async def send(self, raw: bytes) -> tuple[int, bytes]:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self._host, self._port)
        assert self._reader is not None
        self._writer.write(raw)
        head = await self._reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        answer = await self._reader.readexactly(length)
        return status, answer

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
