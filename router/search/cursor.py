"""Opaque page cursors: a position (ts, shard, owner id, id) and a direction, bound to the query
they came from and signed, so a tampered cursor or one from another query is refused. A cursor
carries when it was issued and is refused once older than its time to live; a consistent
search's cursors also carry its pinned snapshots (router/search/snapshot.py)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from router import clock
from router.errors import BadRequest, Unavailable
from router.search.snapshot import Pin

Direction = Literal["next", "prev"]
_SIGNATURE_BYTES = 16
# 3: positions carry the owner id and cursors their issue time (1 had neither; 2 had one or the
# other, depending on the branch that issued it). Cursors of earlier versions have expired.
_VERSION = 3
# The longest cursor the API takes. A position needs about 230 characters; the rest is room for
# a consistent search's snapshots, one per shard and about 20 characters each plus 4 per
# transaction running on that shard when it was taken (12 shards with 80 running each fit).
# Far below the request line and header limit (SHARDLOG_SERVER__MAX_HEADER_BYTES, 64 KiB).
MAX_CURSOR_CHARS = 8192
# How much longer than the first one a later cursor of the same search can be: the position
# is its only part that changes (a shard name of up to 63 characters, an owner id and an id of
# up to 19 digits each, microseconds in the ts).
POSITION_HEADROOM = 192


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
    pin: Pin | None = None


def query_digest(binding: dict[str, Any]) -> str:
    """A short digest of everything that defines a query's result set (not its page size)."""
    canonical = json.dumps(binding, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]


def _not_ours() -> BadRequest:
    return BadRequest("cursor is not a cursor this service issued", "cursor")


class CursorCodec:
    def __init__(
        self, secret: bytes, ttl_s: float = 86400.0, clock: Callable[[], datetime] = clock.now
    ) -> None:
        if len(secret) < 16:
            raise ValueError("cursor secret must be at least 16 bytes")
        self._secret = secret
        self._ttl_s = ttl_s
        self._clock = clock

    def _sign(self, payload: bytes) -> bytes:
        return hmac.new(self._secret, payload, hashlib.sha256).digest()[:_SIGNATURE_BYTES]

    def encode(self, cursor: Cursor, digest: str, headroom: int = 0) -> str:
        """The cursor's text. Longer than MAX_CURSOR_CHARS less ``headroom`` (only the
        snapshots of a consistent search can make it so): 503, as the snapshots depend on
        what was running when they were taken."""
        fields: dict[str, Any] = {
            "v": _VERSION,
            "q": digest,
            "d": cursor.direction,
            "t": cursor.position.ts.isoformat(),
            "s": cursor.position.shard,
            "o": cursor.position.owner_id,
            "i": cursor.position.id,
            "c": int(self._clock().timestamp()),
        }
        if cursor.pin is not None:
            fields["p"] = cursor.pin.as_json()
        body = json.dumps(fields, separators=(",", ":")).encode()
        text = base64.urlsafe_b64encode(self._sign(body) + body).decode().rstrip("=")
        if len(text) > MAX_CURSOR_CHARS - headroom:
            raise Unavailable(
                "the snapshots of this consistent search do not fit in a cursor of "
                f"{MAX_CURSOR_CHARS} characters (many transactions were running on the "
                "shards): retry, or search without consistent=true",
                "consistent",
                retry_after_s=1,
            )
        return text

    def decode(self, text: str, digest: str) -> Cursor:
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError):
            raise _not_ours() from None
        signature, body = raw[:_SIGNATURE_BYTES], raw[_SIGNATURE_BYTES:]
        if len(signature) < _SIGNATURE_BYTES or not hmac.compare_digest(
            signature, self._sign(body)
        ):
            raise _not_ours()
        try:
            fields = json.loads(body)
            version = fields["v"]
        except (ValueError, KeyError, TypeError):
            raise _not_ours() from None
        if version != _VERSION:
            raise BadRequest(
                "cursor has expired (it comes from an older version of this service): search "
                "again from the first page",
                "cursor",
            )
        try:
            position = Position(
                datetime.fromisoformat(fields["t"]),
                str(fields["s"]),
                int(fields["o"]),
                int(fields["i"]),
            )
            direction: Direction = "prev" if fields["d"] == "prev" else "next"
            issued = datetime.fromtimestamp(int(fields["c"]), UTC)
            pin = Pin.from_json(fields["p"]) if "p" in fields else None
            bound_to = fields["q"]
        except (ValueError, KeyError, TypeError, OverflowError):
            raise _not_ours() from None
        age_s = (self._clock() - issued).total_seconds()
        if age_s > self._ttl_s:
            raise BadRequest(
                f"cursor has expired: it was issued {age_s:.0f} s ago, and cursors last "
                f"{self._ttl_s:g} s (SHARDLOG_SEARCH__CURSOR_TTL_S); search again from the "
                "first page",
                "cursor",
            )
        if bound_to != digest:
            raise BadRequest(
                "cursor belongs to another query: keep every parameter but "
                "limit and cursor as on the first page",
                "cursor",
            )
        return Cursor(position, direction, pin)
