"""bench/compaction's pure parts: a day's rows (copies of the real corpus under owners of their
own, each line once per owner, inside the day), the page owners' identical rows and the page
oracle, the writer's bodies."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, date, datetime, timedelta

from bench.compaction import beside, day, pages
from bench.storage import corpus

DAY = date(2026, 11, 20)
START = datetime(2026, 11, 20, tzinfo=UTC)


def test_a_day_is_copies_of_16_owners_each_line_once_inside_the_day() -> None:
    rows = day.day_rows(DAY, copies=3, per_owner=40, prefix="r1-")
    owners = Counter(r.owner for r in rows)
    assert len(owners) == 48 and set(owners.values()) == {40}
    assert all(o.startswith(("r1-c0-", "r1-c1-", "r1-c2-")) for o in owners)
    assert all(START <= r.ts < START + timedelta(days=1) for r in rows)
    systems = corpus.systems()
    for owner in owners:
        system = owner.split("-", 2)[2]
        assert [r.content for r in rows if r.owner == owner] == systems[system][:40], owner
    # The copies' instants differ, and the same arguments give the same rows.
    first = [r.ts for r in rows if r.owner == "r1-c0-Apache"]
    second = [r.ts for r in rows if r.owner == "r1-c1-Apache"]
    assert first != second
    assert day.day_rows(DAY, copies=3, per_owner=40, prefix="r1-") == rows


def test_bodies_hold_every_row_once_in_order() -> None:
    rows = day.day_rows(DAY, copies=1, per_owner=30, prefix="b-")
    bodies = day.bodies(rows, body_rows=100)
    assert len(bodies) == 5
    records = [json.loads(line) for body in bodies for line in body.splitlines()]
    assert [(r["owner"], r["ts"], r["content"]) for r in records] == [
        (r.owner, r.ts.isoformat(), r.content) for r in rows
    ]


def test_the_page_owners_hold_identical_rows_and_the_oracle_pages_them() -> None:
    rows = pages.page_rows(DAY, 2500)
    by_owner = {
        owner: sorted((r.ts, r.content) for r in rows if r.owner == owner)
        for owner in pages.OWNERS.values()
    }
    compacted, heap = by_owner[pages.OWNERS[pages.COMPACTED]], by_owner[pages.OWNERS[pages.HEAP]]
    assert len(heap) == 2500 and compacted == heap
    assert len({ts for ts, _ in heap}) == 2500
    # Spread over the day, not its first hours.
    assert heap[-1][0] - heap[0][0] > timedelta(hours=20)
    oracle = pages.expected(rows)
    assert oracle["first_asc"] == heap[:1000]
    assert oracle["first_desc"] == heap[::-1][:1000]
    assert oracle["second_asc"] == heap[1000:2000]


def test_the_writer_writes_today_in_order_from_its_lines() -> None:
    lines = ["alpha", "beta", "gamma"]
    records = [json.loads(line) for line in beside.writer_body(lines, 5, 2).splitlines()]
    assert [r["content"] for r in records] == ["gamma", "alpha", "beta", "gamma", "alpha"]
    assert {r["owner"] for r in records} == {beside.WRITER_OWNER}
    stamps = [datetime.fromisoformat(r["ts"]) for r in records]
    assert stamps == sorted(stamps) and len(set(stamps)) == 5
