"""A YCSB record as shardlog audit rows, and the checks of what a read or scan returns.

Record ``keynum`` is the owner's rows in one time slot: version v of it has
ts = origin + keynum * slot + v microseconds, content = its YCSB key name, and attrs holding
keynum, version and every field. An insert writes version 0; an update appends the next version
whole (the newest row must hold every field, so writeallfields is in effect always true). A read
is the newest row of the slot: a search of the slot's range, order=desc, limit=1, which each
shard answers from its time index with one row. A scan is one ascending page over the slots of
``length`` records from the start key. Field values are a hash of (key, field, version), so any
row can be checked against what was written without keeping it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bench.ycsb.generators import key_name
from bench.ycsb.properties import Workload


@dataclass(frozen=True)
class Layout:
    """Where records live in time: slot ``slot_us`` microseconds wide (the most versions a record
    can have), record 0 at ``origin``."""

    origin: datetime
    slot_us: int

    def ts(self, keynum: int, version: int) -> datetime:
        return self.origin + timedelta(microseconds=keynum * self.slot_us + version)

    def slots(self, first: int, count: int) -> tuple[str, str]:
        """The search range (from inclusive, to exclusive) of records first..first+count-1."""
        return self.ts(first, 0).isoformat(), self.ts(first + count, 0).isoformat()

    def position(self, ts: datetime) -> tuple[int, int]:
        offset = ts - self.origin
        micros = (offset.days * 86_400 + offset.seconds) * 1_000_000 + offset.microseconds
        return divmod(micros, self.slot_us)


def field_value(key: str, field: str, version: int, length: int) -> str:
    digest = hashlib.blake2b(f"{key}:{field}:{version}".encode(), digest_size=32).hexdigest()
    return (digest * (length // len(digest) + 1))[:length]


def record(workload: Workload, layout: Layout, owner: str, keynum: int, version: int) -> Any:
    """The audit record of one version of a record."""
    key = key_name(keynum, workload.zeropadding, workload.insertorder == "ordered")
    attrs: dict[str, Any] = {"keynum": keynum, "version": version}
    for name in workload.field_names:
        attrs[name] = field_value(key, name, version, workload.fieldlength)
    return {
        "owner": owner,
        "ts": layout.ts(keynum, version).isoformat(),
        "content": key,
        "attrs": attrs,
    }


def row_problem(workload: Workload, layout: Layout, item: dict[str, Any]) -> str | None:
    """Why a returned row is not a version of a record as written, or None."""
    attrs = item.get("attrs") or {}
    keynum, version = attrs.get("keynum"), attrs.get("version")
    if not isinstance(keynum, int) or not isinstance(version, int):
        return f"row {item.get('ref')} carries no keynum/version"
    if layout.position(datetime.fromisoformat(item["ts"])) != (keynum, version):
        return f"record {keynum} version {version} at the wrong ts {item['ts']}"
    key = key_name(keynum, workload.zeropadding, workload.insertorder == "ordered")
    if item.get("content") != key:
        return f"record {keynum} holds key {item.get('content')!r}, not {key!r}"
    for name in workload.field_names:
        if attrs.get(name) != field_value(key, name, version, workload.fieldlength):
            return f"record {keynum} version {version}: {name} differs from what was written"
    return None
