"""The pure parts of bench/ingest's storage and merge-peer measurements."""

from __future__ import annotations

import ipaddress

from bench.ingest import generate, merge, storage
from router.db import ddl


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
