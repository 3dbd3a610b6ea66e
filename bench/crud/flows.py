"""The flows of the CRUD sweep, as the founding reports made them: 5-tuples of random IPv4 or
IPv6 addresses and ports 1-65535, written as forward and reverse pairs, all on one UTC day.

Searches by a partial key need keys that many rows share, so each forward flow takes its source
address (IPv4 flows) from a few busy hosts and its destination port from a few service ports
(the other endpoint, the other port and the protocol stay random). Both pools are sized so that
each of their values is carried by about ``hot_rows`` flows or more: a search for one of them has
whole pages to read even at the largest page size."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import orjson

from router import clock

IPV6_SHARE = 0.3
PROTOCOLS = (6, 17)

FlowKey = tuple[str, str, int, int, int]


@dataclass(frozen=True)
class FlowSet:
    """The records of one sweep (in write order) and the search keys chosen for them."""

    records: list[dict[str, Any]]
    day: date
    switch_prefix: str
    busy_host: str
    busy_host_rows: int
    service_port: int
    service_port_rows: int

    @property
    def window(self) -> dict[str, str]:
        start = datetime(self.day.year, self.day.month, self.day.day, tzinfo=UTC)
        return {
            "from": start.isoformat(),
            "to": (start + timedelta(days=1)).isoformat(),
            "switch_prefix": self.switch_prefix,
        }


def key(record: dict[str, Any]) -> FlowKey:
    return (
        record["src_ip"],
        record["dst_ip"],
        record["src_port"],
        record["dst_port"],
        record["proto"],
    )


def _address(rng: random.Random, v6: bool) -> str:
    if v6:
        groups = (rng.randrange(1, 65536), rng.randrange(65536), rng.randrange(1, 65536))
        return "2001:db8:{:x}:{:x}::{:x}".format(*groups)
    octets = (rng.randrange(1, 224), rng.randrange(256), rng.randrange(256), rng.randrange(1, 255))
    return "{}.{}.{}.{}".format(*octets)


def generate(
    rows: int, seed: int, switch_prefix: str, switches: int = 8, hot_rows: int = 100_000
) -> FlowSet:
    """``rows`` flows (rounded down to pairs) over ``switches`` switches; the same seed gives
    the same flows in the same order."""
    rng = random.Random(seed)
    pairs = rows // 2
    pool = max(1, int(pairs * (1 - IPV6_SHARE)) // hot_rows)
    # Busy hosts are IPv4: a search by one address matches one family only.
    hosts = [_address(rng, False) for _ in range(pool)]
    ports = rng.sample(range(1, 65536), pool)
    day = clock.today() - timedelta(days=1)
    midnight = datetime(day.year, day.month, day.day, tzinfo=UTC)
    seen: set[tuple[Any, ...]] = set()
    records: list[dict[str, Any]] = []
    index = 0
    while len(records) < 2 * pairs:
        v6 = rng.random() < IPV6_SHARE
        # Spread each busy host and port over every switch: a search reaches every shard.
        slot = (index // switches) % pool
        forward = {
            "switch": f"{switch_prefix}{index % switches}",
            "ts": (midnight + timedelta(seconds=rng.randrange(86_400))).isoformat(),
            "src_ip": _address(rng, True) if v6 else hosts[slot],
            "dst_ip": _address(rng, v6),
            "src_port": rng.randrange(1, 65536),
            "dst_port": ports[slot],
            "proto": rng.choice(PROTOCOLS),
            "bytes": rng.randrange(40, 1_500_000),
            "packets": rng.randrange(1, 1000),
        }
        reverse = {
            **forward,
            "src_ip": forward["dst_ip"],
            "dst_ip": forward["src_ip"],
            "src_port": forward["dst_port"],
            "dst_port": forward["src_port"],
            "bytes": rng.randrange(40, 1_500_000),
            "packets": rng.randrange(1, 1000),
        }
        index += 1
        pair_keys = {(forward["switch"], *key(forward)), (reverse["switch"], *key(reverse))}
        if len(pair_keys) < 2 or pair_keys & seen:
            continue  # a repeated 5-tuple would merge on insert
        seen |= pair_keys
        records += (forward, reverse)
    return FlowSet(
        records=records,
        day=day,
        switch_prefix=switch_prefix,
        busy_host=hosts[0],
        busy_host_rows=sum(1 for r in records if r["src_ip"] == hosts[0]),
        service_port=ports[0],
        service_port_rows=sum(1 for r in records if r["dst_port"] == ports[0]),
    )


def repeated(records: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """The same flows with new counters: written again, each merges into its stored row."""
    rng = random.Random(seed)
    return [
        {**r, "bytes": rng.randrange(40, 1_500_000), "packets": rng.randrange(1, 1000)}
        for r in records
    ]


def ndjson_bodies(records: list[dict[str, Any]], batch: int) -> list[bytes]:
    return [
        b"".join(orjson.dumps(r) + b"\n" for r in records[start : start + batch])
        for start in range(0, len(records), batch)
    ]


def delete_bodies(flowset: FlowSet, batch: int) -> list[tuple[int, bytes]]:
    """DELETE /v1/flows bodies of at most ``batch`` 5-tuples each (one switch per body, as the
    API takes them), with the count of flows each names."""
    by_switch: dict[str, list[dict[str, Any]]] = {}
    for record in flowset.records:
        by_switch.setdefault(record["switch"], []).append(record)
    day = flowset.day.isoformat()
    bodies = []
    for switch, mine in sorted(by_switch.items()):
        for start in range(0, len(mine), batch):
            chunk = mine[start : start + batch]
            flows = [
                {
                    "src_ip": r["src_ip"],
                    "dst_ip": r["dst_ip"],
                    "src_port": r["src_port"],
                    "dst_port": r["dst_port"],
                    "proto": r["proto"],
                }
                for r in chunk
            ]
            body = {"switch": switch, "from": day, "to": day, "flows": flows}
            bodies.append((len(chunk), orjson.dumps(body)))
    return bodies
