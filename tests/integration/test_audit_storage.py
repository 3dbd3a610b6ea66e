"""How audit rows are stored (router/db/ddl.py AUDIT_COMPRESSION): a day table the router
creates compresses content and attrs with lz4; a row wide enough for PostgreSQL to compress is
stored compressed, and every row, compressed or not, reads back exactly as written."""

from __future__ import annotations

import random
import uuid
from datetime import timedelta

import orjson

from bench.shard_view import catalog_shards, day_tables, owner_id, shard_sql
from router import clock

NOW = clock.now().replace(microsecond=0)


def _records(owner: str) -> list[dict]:
    rng = random.Random(7)
    template = "user {u} read /srv/projects/{p}/report-{r}.csv from 10.1.{a}.{b} result=ok; "
    long_text = "".join(
        template.format(
            u=rng.randrange(100), p=rng.randrange(50), r=i, a=rng.randrange(256), b=i % 256
        )
        for i in range(80)
    )
    big_attrs = {"items": [{"k": f"key-{i}", "v": "value " * 20, "n": i} for i in range(40)]}
    return [
        {"owner": owner, "ts": NOW.isoformat(), "content": long_text, "attrs": big_attrs},
        {
            "owner": owner,
            "ts": (NOW - timedelta(seconds=1)).isoformat(),
            "content": "".join(rng.choice("abcdef ") for _ in range(512)),
            "attrs": {"short": True},
        },
        {
            "owner": owner,
            "ts": (NOW - timedelta(seconds=2)).isoformat(),
            "content": "ünïcödé ✓ " * 400 + "\t tail",
            "attrs": None,
        },
    ]


def test_new_audit_day_tables_compress_with_lz4_and_read_back_identical(api, cluster) -> None:
    owner = f"storage-{uuid.uuid4().hex[:10]}"
    records = _records(owner)
    body = b"".join(orjson.dumps(r) + b"\n" for r in records)
    response = api.post("/v1/audit", content=body, headers={"content-type": "application/x-ndjson"})
    assert response.status_code == 200, response.text
    ident = owner_id(api, "audit", owner)
    assert ident is not None
    dsns = catalog_shards(api)
    found = day_tables(api, "audit", ident)
    assert found
    methods = []
    for shard, tables in found.items():
        for table in tables:
            settings = shard_sql(
                dsns[shard],
                "SELECT attname, attcompression FROM pg_attribute "
                f"WHERE attrelid = '{table}'::regclass AND attname IN ('content', 'attrs') "
                "ORDER BY 1",
            ).split()
            assert settings == ["attrs|l", "content|l"]
            methods += shard_sql(
                dsns[shard],
                f"SELECT length(content), coalesce(pg_column_compression(content), 'none'), "
                f"coalesce(pg_column_compression(attrs), 'none') FROM {table}",
            ).split()
    # The two wide rows were compressed (content and the large attrs), the 512-character one
    # was stored as it came.
    by_length = {int(line.split("|")[0]): line.split("|")[1:] for line in methods}
    assert by_length[len(records[0]["content"])] == ["lz4", "lz4"]
    assert by_length[len(records[2]["content"])][0] == "lz4"
    assert by_length[512] == ["none", "none"]

    page = api.get(
        "/v1/audit/search",
        params={
            "owner": owner,
            "from": (NOW - timedelta(minutes=1)).isoformat(),
            "to": (NOW + timedelta(minutes=1)).isoformat(),
            "limit": 10,
        },
    ).json()

    def canonical(attrs: object) -> bytes:
        return orjson.dumps(attrs, option=orjson.OPT_SORT_KEYS)

    read = sorted((item["content"], canonical(item["attrs"])) for item in page["items"])
    written = sorted((r["content"], canonical(r["attrs"])) for r in records)
    assert read == written
