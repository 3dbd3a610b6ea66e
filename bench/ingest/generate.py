"""Generators of benchmark rows: audit rows with 512-character content over 'abcdef ' and
flows with a mix of IPv4 and IPv6 addresses."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import orjson

from router import clock

CONTENT_CHARS = 512
ALPHABET = "abcdef "


def audit_records(count: int, owners: list[str], seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    now = clock.now()
    pool = "".join(rng.choice(ALPHABET) for _ in range(CONTENT_CHARS * 64))
    records = []
    for index in range(count):
        start = rng.randrange(0, len(pool) - CONTENT_CHARS)
        ts = now - timedelta(seconds=rng.randrange(0, 3600))
        records.append(
            {
                "owner": owners[index % len(owners)],
                "ts": ts.isoformat(),
                "content": pool[start : start + CONTENT_CHARS],
            }
        )
    return records


def flow_records(count: int, switches: list[str], seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    now = clock.now()
    records = []
    for index in range(count):
        if rng.random() < 0.7:
            src = f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
            dst = f"192.168.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        else:
            src = f"2001:db8:{rng.randrange(65536):x}::{rng.randrange(1, 65536):x}"
            dst = f"2001:db8:ffff::{rng.randrange(1, 65536):x}"
        records.append(
            {
                "switch": switches[index % len(switches)],
                "ts": (now - timedelta(seconds=rng.randrange(0, 3600))).isoformat(),
                "src_ip": src,
                "dst_ip": dst,
                "src_port": rng.randrange(1024, 65536),
                "dst_port": rng.choice((53, 80, 443, 8080)),
                "proto": rng.choice((6, 17)),
                "bytes": rng.randrange(40, 1_500_000),
                "packets": rng.randrange(1, 1000),
            }
        )
    return records


def ndjson_bodies(records: list[dict[str, Any]], batch: int) -> list[bytes]:
    return [
        b"".join(orjson.dumps(r) + b"\n" for r in records[start : start + batch])
        for start in range(0, len(records), batch)
    ]
