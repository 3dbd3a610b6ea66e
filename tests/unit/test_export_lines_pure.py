"""The router's half of rendering export lines (router/search/lines.py): free text escaped for
JSON in bulk is what orjson makes of each text alone; CSV lines' constant cells."""

from __future__ import annotations

import orjson

from router.search import lines

TEXTS = [
    "",
    "plain",
    '","',
    '"',
    "\\",
    '\\","',
    '["',
    '"]',
    'a","b',
    "\x01\x1f\x7f\n\r\t\b\f",
    "é 日本 😀 \u2028",
    ",",
    '""',
]


def test_json_bodies_are_each_text_escaped_alone() -> None:
    for count in range(len(TEXTS) + 1):
        texts = TEXTS[:count] + TEXTS[: len(TEXTS) - count]
        assert lines.json_bodies(texts) == [orjson.dumps(t)[1:-1] for t in texts]


def test_json_bodies_of_nothing_and_of_one() -> None:
    assert lines.json_bodies([]) == []
    assert lines.json_bodies([""]) == [b""]
    assert lines.json_bodies(['","']) == [b'\\",\\"']


def test_csv_headers() -> None:
    assert lines.csv_header("audit") == "ts,id,owner,shard,content,attrs\n"
    assert lines.csv_header("flow").startswith("first_seen,switch,shard,id,src_ip,")
