"""router/search/page.py without a server: the merge of the shards' records equals the merge of
their rows (router/search/merge.py) and reads no further than the page; item keys in the
models' order; an item with a key its model lacks is refused."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

import orjson
import pytest

from router.models.search import AuditItem, FlowItem
from router.search import merge, page

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def answers(seed: int) -> list[tuple[str, list[dict[str, object]]]]:
    """Shards' answers, each sorted as a shard sorts it, with ties across shards and owners."""
    rng = random.Random(seed)
    out = []
    for shard in ("s02", "s01", "s10"):
        records = [
            {
                "ts": T0 + timedelta(seconds=rng.randrange(5)),
                "owner_id": rng.choice([1, 2]),
                "id": rng.randrange(1000),
            }
            for _ in range(rng.randrange(0, 30))
        ]
        unique = {(r["ts"], r["owner_id"], r["id"]): r for r in records}
        out.append((shard, sorted(unique.values(), key=merge.within_shard)))
    return out


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("descending", [False, True])
def test_merged_records_equal_the_merged_rows(seed: int, descending: bool) -> None:
    shards = answers(seed)
    if descending:
        shards = [(shard, records[::-1]) for shard, records in shards]
    limit = random.Random(seed).randrange(1, 60)
    rows = [[{**r, "shard": shard} for r in records] for shard, records in shards]
    expected = merge.merge(rows, descending, limit)
    got = [
        {**record, "shard": shard}
        for shard, record in page.merge_records(shards, descending, limit)
    ]
    assert got == expected


def test_the_merge_reads_no_further_than_the_page() -> None:
    def endless(shard: str):
        n = 0
        while True:
            n += 1
            yield {"ts": T0 + timedelta(seconds=n), "owner_id": 1, "id": n}

    taken = page.merge_records([("a", endless("a")), ("b", endless("b"))], False, 5)  # type: ignore[list-item]
    assert [(shard, r["id"]) for shard, r in taken] == [
        ("a", 1),
        ("b", 1),
        ("a", 2),
        ("b", 2),
        ("a", 3),
    ]


def test_fields_are_the_models_fields_in_order() -> None:
    assert tuple(AuditItem.model_fields) == page.AUDIT_FIELDS
    assert tuple(FlowItem.model_fields) == page.FLOW_FIELDS


def test_flow_items_are_put_in_the_models_order() -> None:
    item = {name: index for index, name in enumerate(reversed(page.FLOW_FIELDS))}
    found = {"items": [item] * 3, "next_cursor": None, "prev_cursor": None}
    found |= {"count": None, "partial": False, "failed_shards": []}
    body = orjson.loads(asyncio.run(page.encode("flow", found)))
    assert [list(i) for i in body["items"]] == [list(page.FLOW_FIELDS)] * 3
    assert list(body) == list(page.PAGE_FIELDS)


@pytest.mark.parametrize("kind", ["audit", "flow"])
def test_an_item_with_a_key_its_model_lacks_is_refused(kind) -> None:
    item = {name: 1 for name in page.FIELDS[kind][:-1]} | {"unnamed": 1}
    found = {"items": [item], "next_cursor": None, "prev_cursor": None}
    found |= {"count": None, "partial": False, "failed_shards": []}
    with pytest.raises(ValueError, match="unnamed"):
        asyncio.run(page.encode(kind, found))


def test_items_of_makes_every_row_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(page, "TURN_S", 0.0)
    rows = list(range(3 * page.CHUNK + 1))
    assert asyncio.run(page.items_of(rows, lambda n: {"n": n})) == [{"n": n} for n in rows]


def test_a_shards_share_is_all_for_small_pages_and_one_shard() -> None:
    assert page.shard_share(101, 6) == 101
    assert page.shard_share(1001, 1) == 1001
    assert page.shard_share(1001, 6) == 2 * 1001 // 6 + 16
    assert page.shard_share(10_001, 12) == 2 * 10_001 // 12 + 16


@pytest.mark.parametrize("seed", range(60))
@pytest.mark.parametrize("descending", [False, True])
def test_answers_completed_by_short_shards_give_the_whole_merge(seed: int, descending) -> None:
    """Shards answering their share, then more after their last row while short_shards names
    them (as SearchService._complete does), end with the same first rows as shards answering
    all they hold; skewed shards included."""
    rng = random.Random(seed)
    held = {}
    for shard in ("s1", "s2", "s3", "s4"):
        count = rng.choice([0, 3, 40, 400])
        rows = [
            {
                "ts": T0 + timedelta(seconds=rng.randrange(50)),
                "owner_id": rng.choice([1, 2]),
                "id": n,
            }
            for n in range(count)
        ]
        held[shard] = sorted(rows, key=merge.within_shard, reverse=descending)
    wanted = rng.choice([1, 20, 101, 300])
    share = max(1, wanted // 5)

    def after(shard: str, last: dict[str, object] | None, cap: int) -> list[dict[str, object]]:
        rows = held[shard]
        start = 0 if last is None else rows.index(last) + 1
        return rows[start : start + cap]

    answers = {shard: after(shard, None, share) for shard in held}
    full = {shard for shard, rows in answers.items() if len(rows) == share}
    rounds = 0
    while short := page.short_shards(answers, full, descending, wanted):
        rounds += 1
        more = {shard: after(shard, last, cap) for shard, (last, cap) in short.items()}
        full = {shard for shard, rows in more.items() if len(rows) >= short[shard][1]}
        for shard, rows in more.items():
            answers[shard] = answers[shard] + rows
    got = page.merge_records(list(answers.items()), descending, wanted)
    expected = page.merge_records(list(held.items()), descending, wanted)
    assert got == expected
    assert rounds <= len(held) * 2


def short_by_merging(
    answers: dict[str, list[dict[str, object]]], full: set[str], descending: bool, wanted: int
) -> dict[str, tuple[object, int]]:
    """short_shards by its definition: merge, then see whose rows all made the page."""
    taken: dict[str, int] = {}
    for shard, _ in page.merge_records(list(answers.items()), descending, wanted):
        taken[shard] = taken.get(shard, 0) + 1
    return {
        shard: (rows[-1], wanted - len(rows))
        for shard, rows in answers.items()
        if shard in full and rows and taken.get(shard, 0) == len(rows) < wanted
    }


@pytest.mark.parametrize("seed", range(80))
@pytest.mark.parametrize("descending", [False, True])
def test_short_shards_are_those_a_merge_finds(seed: int, descending: bool) -> None:
    rng = random.Random(seed)
    shards = dict(answers(seed))
    if descending:
        shards = {shard: records[::-1] for shard, records in shards.items()}
    full = {shard for shard in shards if rng.random() < 0.7}
    for wanted in (1, 5, 20, 45, 100):
        assert page.short_shards(shards, full, descending, wanted) == short_by_merging(
            shards, full, descending, wanted
        )


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("descending", [False, True])
def test_merged_rows_are_the_merge_a_chunk_at_a_time(
    seed: int, descending: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(page, "CHUNK", 7)
    monkeypatch.setattr(page, "TURN_S", 0.0)
    shards = answers(seed)
    if descending:
        shards = [(shard, records[::-1]) for shard, records in shards]
    for limit in (1, 7, 8, 20, 200):
        expected = page.merge_records(shards, descending, limit)
        got = asyncio.run(
            page.merged_rows(shards, descending, limit, lambda shard, record: (shard, record))
        )
        assert got == expected


@pytest.mark.parametrize("rows", [0, 1, 6, 7, 8, 15, 22])
@pytest.mark.parametrize("kind", ["audit", "flow"])
def test_a_page_written_a_chunk_at_a_time_is_orjsons_page(
    rows: int, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(page, "WRITE_CHUNK", 7)
    monkeypatch.setattr(page, "TURN_S", 0.0)
    fields = page.FIELDS[kind]
    items = [
        {name: f"{name}-{n}\u2028é" if n % 2 else n for name in reversed(fields)}
        for n in range(rows)
    ]
    found = {"items": items, "next_cursor": "c1", "prev_cursor": None}
    found |= {"count": {"value": rows, "exact": True}, "partial": False, "failed_shards": []}
    expected = orjson.dumps(
        {
            name: [page.ordered(kind, item) for item in items] if name == "items" else found[name]
            for name in page.PAGE_FIELDS
        }
    )
    assert asyncio.run(page.encode(kind, found)) == expected  # type: ignore[arg-type]


def test_turns_yield_only_once_the_loop_was_held_long_enough(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slept: list[float] = []

    async def sleep(delay: float) -> None:
        slept.append(delay)

    clock = iter([0.0, 0.00005, 0.0002, 0.0002, 0.00025, 0.0004, 0.0004])
    monkeypatch.setattr(page.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(page.asyncio, "sleep", sleep)

    async def steps() -> None:
        turns = page.Turns()  # started at 0
        await turns.take()  # 50 µs: no
        await turns.take()  # 200 µs: yields, starts again at 200
        await turns.take()  # 250 µs: no
        await turns.take()  # 400 µs: yields

    asyncio.run(steps())
    assert slept == [0, 0]
