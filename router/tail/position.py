"""Resume cursors of tail streams (each event's ``id:``): what the client has been sent, bound
to the subscription's filters and signed with the search cursors' secret. Pure: no I/O.

A live position (router/tail/ordering.py, Marks) says, per shard, that every matching row
committed up to ``base`` was sent, and of those committed after it each one a claim covers:
its transaction seen by the claim's snapshot and its key at most the claim's key. A replay
position (``from`` given, the replay not finished): every matching row of the shards' ``base``
snapshots from ``from`` up to ``last`` was sent, and nothing committed after ``base``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from router.errors import BadRequest
from router.search.snapshot import ShardSnapshot
from router.tail.events import EventKey

_SIGNATURE_BYTES = 16
_VERSION = 1
# Far below the request line and header limit (Last-Event-ID travels as a header).
MAX_CURSOR_CHARS = 16384


Claim = tuple[ShardSnapshot, EventKey]


@dataclass(frozen=True)
class TailPosition:
    base: Mapping[str, ShardSnapshot]
    claims: Mapping[str, tuple[Claim, ...]]
    last: EventKey | None
    # Seconds since the epoch when the oldest unsent row was read (the tail log must still
    # hold it for a resume), or when the position was made.
    since: float
    replay_from: datetime | None = None

    def sent(self, shard: str, xid: int, key: EventKey) -> bool:
        """Whether a row committed after ``base`` was sent already."""
        return any(snap.sees(xid) and key <= most for snap, most in self.claims.get(shard, ()))


def _key_from(value: Any) -> EventKey | None:
    if value is None:
        return None
    return _key(value)


def _key(value: Any) -> EventKey:
    ts, shard, owner_id, row_id, xid = value
    return (datetime.fromisoformat(ts), str(shard), int(owner_id), int(row_id), int(xid))


def _snapshots(value: Any) -> dict[str, ShardSnapshot]:
    if not isinstance(value, dict):
        raise ValueError("not snapshots")
    return {str(shard): ShardSnapshot.from_compact(v) for shard, v in value.items()}


class TailCursorCodec:
    def __init__(self, secret: bytes, keep_s: float) -> None:
        self._keep_s = keep_s
        # Keyed once: a copy per cursor skips the key's setup (a tail signs one per row sent).
        self._mac = hmac.new(secret, digestmod=hashlib.sha256)
        # Keys as JSON, by key: a cursor repeats most shards' keys event after event.
        self._keys: dict[EventKey, list[Any]] = {}

    def _key(self, key: EventKey) -> list[Any]:
        found = self._keys.get(key)
        if found is None:
            if len(self._keys) > 50_000:
                self._keys.clear()
            found = self._keys[key] = [key[0].isoformat(), key[1], key[2], key[3], key[4]]
        return found

    def _sign(self, payload: bytes) -> bytes:
        mac = self._mac.copy()
        mac.update(payload)
        return mac.digest()[:_SIGNATURE_BYTES]

    @staticmethod
    def base_part(base: Mapping[str, ShardSnapshot]) -> dict[str, list[int]]:
        return {shard: snap.compact() for shard, snap in sorted(base.items())}

    def shard_part(
        self, position: TailPosition, base: dict[str, list[int]] | None = None
    ) -> dict[str, Any]:
        """The part of a cursor that only changes between releases (encoded once for all the
        events of one); ``base``: ``base_part`` of the position's base, if made already."""
        claims = {
            shard: [[snap.compact(), self._key(key)] for snap, key in found]
            for shard, found in sorted(position.claims.items())
            if found
        }
        part: dict[str, Any] = {
            "b": self.base_part(position.base) if base is None else base,
            "s": claims,
            "a": int(position.since),
        }
        if position.replay_from is not None:
            part["r"] = position.replay_from.isoformat()
        return part

    def encode(
        self, shard_part: Mapping[str, Any], last: EventKey | None, digest: str, now: float
    ) -> str:
        key = None if last is None else self._key(last)
        body = orjson.dumps({"v": _VERSION, "q": digest, "c": int(now), "k": key, **shard_part})
        return base64.urlsafe_b64encode(self._sign(body) + body).decode().rstrip("=")

    def decode(self, text: str, digest: str, field: str, now: float) -> TailPosition:
        not_ours = BadRequest("not a cursor of this tail stream's service", field)
        if len(text) > MAX_CURSOR_CHARS:
            raise not_ours
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError):
            raise not_ours from None
        signature, body = raw[:_SIGNATURE_BYTES], raw[_SIGNATURE_BYTES:]
        if len(signature) < _SIGNATURE_BYTES or not hmac.compare_digest(
            signature, self._sign(body)
        ):
            raise not_ours
        try:
            fields = orjson.loads(body)
            if fields["v"] != _VERSION:
                raise ValueError("version")
            base = _snapshots(fields["b"])
            claims = {
                str(shard): tuple(
                    (ShardSnapshot.from_compact(snap), _key(key)) for snap, key in found
                )
                for shard, found in fields["s"].items()
            }
            position = TailPosition(
                base,
                claims,
                _key_from(fields["k"]),
                float(fields["a"]),
                datetime.fromisoformat(fields["r"]) if "r" in fields else None,
            )
            bound_to = fields["q"]
        except (ValueError, KeyError, TypeError, OverflowError, orjson.JSONDecodeError):
            raise not_ours from None
        if bound_to != digest:
            raise BadRequest(
                "the cursor belongs to a tail with other filters: resume with the same parameters",
                field,
            )
        age = now - position.since
        if age > self._keep_s:
            raise BadRequest(
                f"the cursor's rows were read {age:.0f} s ago and the shards keep their tail "
                f"log for {self._keep_s:g} s (SHARDLOG_TAIL__LOG_KEEP_S): start again with "
                "from=<the time of the last row you have>",
                field,
            )
        return position
