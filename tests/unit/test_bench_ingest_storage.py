"""The pure parts of bench/ingest's storage and merge-peer measurements."""

from __future__ import annotations

import ipaddress
from datetime import date

from bench.ingest import generate, merge, merge_variants, storage
from router.db import ddl
from router.db.names import day_table


def test_templated_texts_have_the_asked_length_and_repeat_with_the_seed() -> None:
    texts = storage.templated(50, 512, seed=3)
    assert {len(t) for t in texts} == {512}
    assert texts == storage.templated(50, 512, seed=3)
    assert texts != storage.templated(50, 512, seed=4)
    assert len(set(texts)) == 50


def test_corpora_share_times_and_long_text_is_long() -> None:
    texts = storage.corpora(4000)
    assert [r[0] for r in texts["synthetic"]] == [r[0] for r in texts["templated"]]
    assert {len(r[1]) for r in texts["templated-long"]} == {4096}
    assert len(texts["templated-long"]) == 1000


def test_peer_parts_are_the_size_of_a_rest_requests_parts() -> None:
    # 100k rows over 4 switches, each owner's group 6 of 12 shards: 24 parts per request.
    assert merge.part_rows(100_000, 4, 12, 2) == 4166
    assert merge.part_rows(10, 4, 12, 2) == 1


def test_staged_rows_follow_the_staging_columns() -> None:
    record = generate.flow_records(1, ["s"], seed=2)[0]
    [row] = merge.staged_rows([record])
    assert len(row) == len(ddl.FLOW_WRITE_COLUMNS)
    columns = dict(zip(ddl.FLOW_WRITE_COLUMNS, row, strict=True))
    assert columns["src_port"] == record["src_port"]
    assert columns["bytes"] == record["bytes"]
    assert columns["ip_version"] == ipaddress.ip_address(record["src_ip"]).version
    assert columns["first_seen"] == columns["last_seen"]


def test_the_unordered_merge_differs_only_by_its_order() -> None:
    table = day_table("flow", 1, date(2026, 11, 25))
    ordered, unordered = ddl.flow_merge_sql(table), merge_variants.unordered_merge(table)
    assert "ORDER BY" in ordered and "ORDER BY" not in unordered
    assert unordered == ordered.replace(" ORDER BY " + ", ".join(ddl.FLOW_KEY), "")


def test_key_order_puts_ipv4_before_ipv6_and_addresses_in_byte_order() -> None:
    records = generate.flow_records(200, ["s"], seed=5)
    rows = sorted(merge.staged_rows(records), key=merge_variants.key_order)
    versions = [row[4] for row in rows]
    assert versions == sorted(versions)
    v4 = [ipaddress.ip_address(r[0][-4:]) for r in rows if r[4] == 4]
    assert v4 == sorted(v4)
