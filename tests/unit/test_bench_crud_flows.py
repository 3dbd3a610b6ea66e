"""The CRUD sweep's flows: forward and reverse pairs of unique 5-tuples, search keys that many
flows share, and DELETE bodies that name every flow once."""

from __future__ import annotations

import ipaddress

import orjson

from bench.crud import flows


def test_pairs_are_forward_and_reverse_of_unique_tuples() -> None:
    flowset = flows.generate(2_000, seed=3, switch_prefix="sw-", switches=4, hot_rows=100)
    records = flowset.records
    assert len(records) == 2_000
    assert len({(r["switch"], *flows.key(r)) for r in records}) == len(records)
    for forward, reverse in zip(records[::2], records[1::2], strict=True):
        assert (reverse["src_ip"], reverse["src_port"]) == (forward["dst_ip"], forward["dst_port"])
        assert (reverse["dst_ip"], reverse["dst_port"]) == (forward["src_ip"], forward["src_port"])
        assert reverse["switch"] == forward["switch"]
    versions = {ipaddress.ip_address(r["src_ip"]).version for r in records}
    assert versions == {4, 6}
    assert all(1 <= r["src_port"] <= 65535 and 1 <= r["dst_port"] <= 65535 for r in records)
    assert {r["ts"][:10] for r in records} == {flowset.day.isoformat()}


def test_search_keys_are_shared_by_many_flows_on_every_switch() -> None:
    flowset = flows.generate(2_000, seed=3, switch_prefix="sw-", switches=4, hot_rows=100)
    busy = [r for r in flowset.records if r["src_ip"] == flowset.busy_host]
    assert len(busy) == flowset.busy_host_rows >= 100
    assert {r["switch"] for r in busy} == {f"sw-{i}" for i in range(4)}
    port = [r for r in flowset.records if r["dst_port"] == flowset.service_port]
    assert len(port) == flowset.service_port_rows >= 100


def test_same_seed_same_flows_and_repeats_keep_the_keys() -> None:
    first = flows.generate(200, seed=9, switch_prefix="sw-")
    assert first.records == flows.generate(200, seed=9, switch_prefix="sw-").records
    again = flows.repeated(first.records, seed=1)
    assert [flows.key(r) for r in again] == [flows.key(r) for r in first.records]
    assert [r["bytes"] for r in again] != [r["bytes"] for r in first.records]


def test_delete_bodies_name_every_flow_once_per_switch_and_batch() -> None:
    flowset = flows.generate(1_000, seed=4, switch_prefix="sw-", switches=3)
    named = []
    for count, body in flows.delete_bodies(flowset, 70):
        parsed = orjson.loads(body)
        assert count == len(parsed["flows"]) <= 70
        assert parsed["from"] == parsed["to"] == flowset.day.isoformat()
        named += [(parsed["switch"], *f.values()) for f in parsed["flows"]]
    assert sorted(named) == sorted((r["switch"], *flows.key(r)) for r in flowset.records)
