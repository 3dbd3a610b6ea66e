"""1,000-row pages of a compacted owner-day beside the same rows in the heap layout: two
owners given identical rows (ts and content) on one closed day, one compacted, the other
left a heap; the router's REST search of the whole day with limit=1000, ascending,
descending, and the second ascending page by the first's cursor. Every page is checked
against the rows written (the oracle), so a fast wrong answer cannot pass."""

from __future__ import annotations

import statistics
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import httpx

from bench.harness import auth_for, timed_get
from bench.storage import corpus
from bench.storage.corpus import Row

LIMIT = 1000
COMPACTED, HEAP = "compacted", "heap"
OWNERS = {COMPACTED: "pages-compacted", HEAP: "pages-heap"}
FORMS = ("first_asc", "first_desc", "second_asc")


def page_rows(day: date, count: int) -> list[Row]:
    """``count`` real lines of every system, spread over ``day`` (every k-th by ts), written
    once for each owner of OWNERS."""
    every = sorted(corpus.real_rows(day, None, seed=41), key=lambda r: r.ts)
    picked = every[:: max(1, len(every) // count)][:count]
    return [Row(owner, r.ts, r.content) for owner in OWNERS.values() for r in picked]


def expected(rows: list[Row]) -> dict[str, list[tuple[datetime, str]]]:
    """The oracle: each form's page as (ts, content), from the rows written."""
    mine = sorted((r.ts, r.content) for r in rows if r.owner == OWNERS[HEAP])
    return {
        "first_asc": mine[:LIMIT],
        "first_desc": mine[::-1][:LIMIT],
        "second_asc": mine[LIMIT : 2 * LIMIT],
    }


def _seen(page: dict[str, Any]) -> list[tuple[datetime, str]]:
    return [(datetime.fromisoformat(i["ts"]), i["content"]) for i in page["items"]]


async def measure(url: str, day: date, rows: list[Row], repeats: int) -> dict[str, Any]:
    """p50 (and every sample, ms) of each form on each layout, the layouts taking turns;
    whether every page equalled the oracle."""
    start = datetime.combine(day, time(), UTC)
    window = {
        "from": start.isoformat(),
        "to": (start + timedelta(days=1)).isoformat(),
        "limit": LIMIT,
    }
    oracle = expected(rows)
    samples: dict[str, dict[str, list[float]]] = {f: {COMPACTED: [], HEAP: []} for f in FORMS}
    wrong: list[str] = []
    async with httpx.AsyncClient(base_url=url, timeout=60, headers=auth_for(url)) as http:
        params: dict[str, dict[str, dict[str, Any]]] = {}
        for layout, owner in OWNERS.items():
            _, first = await timed_get(http, {**window, "owner": owner})
            params[layout] = {
                "first_asc": {**window, "owner": owner},
                "first_desc": {**window, "owner": owner, "order": "desc"},
                "second_asc": {**window, "owner": owner, "cursor": first["next_cursor"]},
            }
        for run in range(repeats + 2):  # the first two warm the caches, unmeasured
            for form in FORMS:
                for layout in (COMPACTED, HEAP) if run % 2 else (HEAP, COMPACTED):
                    took, page = await timed_get(http, params[layout][form])
                    if _seen(page) != oracle[form]:
                        wrong.append(f"{layout} {form}")
                    if run >= 2:
                        samples[form][layout].append(round(took, 3))
    return {
        "rows_per_owner": len(rows) // len(OWNERS),
        "p50_ms": {
            form: {layout: round(statistics.median(s), 2) for layout, s in by.items()}
            for form, by in samples.items()
        },
        "samples_ms": samples,
        "equal_to_rows_written": not wrong,
        "differences": sorted(set(wrong)),
    }
