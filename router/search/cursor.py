"""Opaque page cursors: a position (ts, shard, owner id, id) and a direction, bound to the query
they came from and signed, so a tampered cursor or one from another query is refused."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from router.errors import BadRequest

Direction = Literal["next", "prev"]
_SIGNATURE_BYTES = 16
# 2: positions carry the owner id (1 had none; its cursors are refused as not issued here).
_VERSION = 2


@dataclass(frozen=True)
class Position:
    """A row's place in the order of every search. ``owner_id`` (the catalog id of its owner or
    switch) breaks ties between owners: two owners' day tables on one shard number their rows
    independently, so (ts, shard, id) alone may repeat."""

    ts: datetime
    shard: str
    owner_id: int
    id: int

    def key(self) -> tuple[datetime, str, int, int]:
        return (self.ts, self.shard, self.owner_id, self.id)


@dataclass(frozen=True)
class Cursor:
    position: Position
    direction: Direction


def query_digest(binding: dict[str, Any]) -> str:
    """A short digest of everything that defines a query's result set (not its page size)."""
    canonical = json.dumps(binding, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]


class CursorCodec:
    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("cursor secret must be at least 16 bytes")
        self._secret = secret

    def _sign(self, payload: bytes) -> bytes:
        return hmac.new(self._secret, payload, hashlib.sha256).digest()[:_SIGNATURE_BYTES]

    def encode(self, cursor: Cursor, digest: str) -> str:
        body = json.dumps(
            {
                "v": _VERSION,
                "q": digest,
                "d": cursor.direction,
                "t": cursor.position.ts.isoformat(),
                "s": cursor.position.shard,
                "o": cursor.position.owner_id,
                "i": cursor.position.id,
            },
            separators=(",", ":"),
        ).encode()
        return base64.urlsafe_b64encode(self._sign(body) + body).decode().rstrip("=")

    def decode(self, text: str, digest: str) -> Cursor:
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError):
            raise BadRequest("cursor is not a cursor this service issued", "cursor") from None
        signature, body = raw[:_SIGNATURE_BYTES], raw[_SIGNATURE_BYTES:]
        if len(signature) < _SIGNATURE_BYTES or not hmac.compare_digest(
            signature, self._sign(body)
        ):
            raise BadRequest("cursor is not a cursor this service issued", "cursor")
        try:
            fields = json.loads(body)
            if fields["v"] != _VERSION:
                raise ValueError("a cursor of an earlier version")
            position = Position(
                datetime.fromisoformat(fields["t"]),
                str(fields["s"]),
                int(fields["o"]),
                int(fields["i"]),
            )
            direction: Direction = "prev" if fields["d"] == "prev" else "next"
            bound_to = fields["q"]
        except (ValueError, KeyError, TypeError):
            raise BadRequest("cursor is not a cursor this service issued", "cursor") from None
        if bound_to != digest:
            raise BadRequest(
                "cursor belongs to another query: keep every parameter but "
                "limit and cursor as on the first page",
                "cursor",
            )
        return Cursor(position, direction)
