"""bench/console: the web console (/ui) as a user meets it, on a cluster of its own.

(a) Weight: every file under router/ui/ compressed by gzip -9, summed, and the bytes the router
    actually sends for them with Accept-Encoding: gzip. Budget: 300 KB.
(b) First page: headless chromium (Debian's, driven by selenium) signs in, fills the audit form
    (one owner holding --rows rows over the last 23 hours, window "last 24 h") and submits it;
    measured by the page's own clock from the submit to the first page's rows painted in the
    table, from a freshly loaded view each time, one unmeasured run first, medians of
    --repeats. Two searches: every row (newest first), and a substring that about one row in
    ten holds. Beside each, the same API call alone (httpx) to tell the router's share from
    the page's. Budget: 1 s.

    python -m bench.console [--rows 300000] [--repeats 5] [--shards 12]

Writes bench/results/console.{json,png}.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from itertools import groupby
from typing import Any

import httpx

from bench import cluster_run, harness
from bench.console.assets import BUDGET_GZIP_BYTES, files, gzip_sizes, sent_sizes
from bench.console.browser import console_login, first_page_ms, start_browser
from bench.harness import bench_settings, verdict, write_results
from bench.search.shards import Rows, map_keys, shard_connections
from bench.stamps import mode_of
from router import clock
from router.db.names import day_table
from router.settings import Settings

OWNER = "bench-console"
TARGET_FIRST_PAGE_MS = 1000.0
COPY_BATCH = 50_000
SPAN = timedelta(hours=23)
# What the form is filled with besides the owner, per search.
CASES: dict[str, dict[str, str]] = {
    "every row": {},
    "one pattern in ten": {"q": "denied"},
}
VERBS = ("logged in", "logged out", "read", "updated", "deleted", "created", "listed", "sudo")
OBJECTS = ("key", "bucket", "invoice", "user", "token", "policy", "report")


def batches(total: int, now: datetime, seed: int = 7) -> Iterator[tuple[date, Rows]]:
    """Audit rows (ts, content, attrs) at random times of the last 23 hours, in batches of at
    most COPY_BATCH rows of one UTC day each; one row in ten says "denied"."""
    rng = random.Random(seed)
    for start in range(0, total, COPY_BATCH):
        rows: Rows = []
        for n in range(start, min(total, start + COPY_BATCH)):
            ts = now - SPAN * rng.random()
            verb = "denied" if n % 10 == 0 else rng.choice(VERBS)
            content = (
                f"user u{rng.randrange(5000)} {verb} {rng.choice(OBJECTS)} {rng.randrange(10**6)}"
                f" from 10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
            )
            rows.append((ts, content, f'{{"n": {n}}}'))
        rows.sort(key=lambda row: row[0])
        for day, of_day in groupby(rows, key=lambda row: row[0].date()):
            yield day, list(of_day)


async def load(settings: Settings, url: str, total: int, now: datetime) -> None:
    """The owner mapped by one write through the router, its rows copied onto its group's
    shards, every shard analysed and its day tables registered."""
    ((ident, group),) = (await map_keys(url, "audit", [OWNER], now)).values()
    async with shard_connections(settings) as shards:
        for day, rows in batches(total, now):
            await shards.copy(day_table("audit", ident, day), shards.of(group), [rows])
        await shards.settle()


async def api_ms(http: httpx.AsyncClient, case: dict[str, str], repeats: int) -> list[float]:
    """The first page's API call as the console makes it for the form's values: one
    unmeasured, then ``repeats`` timed."""
    now = clock.real_now()
    params = {
        "owner": OWNER,
        "from": (now - timedelta(days=1)).isoformat(),
        "to": (now + timedelta(minutes=1)).isoformat(),
        "order": "desc",
        "limit": 50,
        "match": "substring",
        "count": "estimate",
        **case,
    }
    await harness.timed_get(http, params)
    return [(await harness.timed_get(http, params))[0] for _ in range(repeats)]


def browser_pages(url: str, token: str, repeats: int) -> dict[str, dict[str, Any]]:
    """Per search: the first page's times in the browser, and what the page then shows."""
    browser = start_browser()
    try:
        console_login(browser, url, token)
        results = {}
        for name, case in CASES.items():
            values = {"owner": OWNER, "range": "24h", **case}
            first_page_ms(browser, url, values)  # warm-up
            runs = [first_page_ms(browser, url, values) for _ in range(repeats)]
            shown, count = browser.execute_script(
                'return [document.querySelectorAll("#audit-table tbody tr.row").length,'
                ' document.querySelector("#audit-count").textContent]'
            )
            results[name] = {
                "median_ms": round(statistics.median(runs), 1),
                "runs_ms": [round(ms, 1) for ms in runs],
                "rows_shown": shown,
                "count_shown": count,
            }
        return results
    finally:
        browser.quit()


def measurement(settings: Settings, rows: int, repeats: int) -> cluster_run.Measurement:
    async def measure(http: httpx.AsyncClient, _: Any) -> dict[str, Any]:
        url = str(http.base_url).rstrip("/")
        sent = sent_sizes(url, files())
        print(f"  loading {rows:,} audit rows of {OWNER}", flush=True)
        # The browser's ranges end at its clock, the machine's (not a shifted test clock).
        await load(settings, url, rows, clock.real_now())
        token = http.headers["authorization"].removeprefix("Bearer ")
        pages = await asyncio.to_thread(browser_pages, url, token, repeats)
        for name, case in CASES.items():
            page = pages[name]
            page["api_median_ms"] = round(statistics.median(await api_ms(http, case, repeats)), 1)
            print(
                f"  {name:20} first page {page['median_ms']:7.1f} ms in the browser, API alone "
                f"{page['api_median_ms']:6.1f} ms ({page['rows_shown']} rows of "
                f"{page['count_shown']})",
                flush=True,
            )
        return {"sent": sent, "pages": pages}

    return measure


def plot(payload: dict[str, Any]) -> Any:
    def draw(figure: Any) -> None:
        weight = payload["assets"]["files"]
        names = list(weight)
        axes = figure.add_subplot(1, 2, 1)
        harness.grouped_bars(
            axes,
            names,
            {
                "gzip -9": [weight[n]["gzip_bytes"] / 1024 for n in names],
                "sent by the router": [weight[n]["sent_bytes"] / 1024 for n in names],
            },
        )
        axes.tick_params(axis="x", labelrotation=60)
        axes.set_ylabel("KB")
        axes.set_title(
            f"console files, gzip: {payload['assets']['gzip_bytes'] / 1024:.1f} KB in all "
            f"(budget {BUDGET_GZIP_BYTES // 1024} KB)"
        )
        axes.legend()
        pages = payload["first_page"]
        cases = list(pages)
        axes = figure.add_subplot(1, 2, 2)
        harness.grouped_bars(
            axes,
            cases,
            {
                "submit to rows painted": [pages[c]["median_ms"] for c in cases],
                "the API call alone": [pages[c]["api_median_ms"] for c in cases],
            },
        )
        axes.axhline(TARGET_FIRST_PAGE_MS, color="red", linestyle="--", label="budget")
        axes.set_ylabel("ms (median)")
        axes.set_title(f"first page, {payload['params']['rows']:,} rows of one owner")
        axes.legend()

    return draw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.console")
    parser.add_argument("--rows", type=int, default=300_000, help="audit rows of the owner")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--shards", type=int, default=12)
    cluster_run.add_cluster_flags(parser, "var/bench-console")
    args = parser.parse_args(argv)

    settings = bench_settings(
        args.data_dir, shards=args.shards, base_port=args.base_port, router_port=args.router_port
    )
    names = files()
    gzipped = gzip_sizes()
    measured = cluster_run.run(settings, args.keep, measurement(settings, args.rows, args.repeats))
    sent, pages = measured["sent"], measured["pages"]
    gzip_total, sent_total = sum(gzipped.values()), sum(sent.values())
    assets = {
        "files": {n: {"gzip_bytes": gzipped[n], "sent_bytes": sent[n]} for n in names},
        "gzip_bytes": gzip_total,
        "sent_bytes": sent_total,
    }
    verdicts = {
        "assets_gzip_bytes": verdict(gzip_total, BUDGET_GZIP_BYTES),
        "assets_sent_bytes": verdict(sent_total, BUDGET_GZIP_BYTES),
        **{
            f"first_page_ms: {name}": verdict(page["median_ms"], TARGET_FIRST_PAGE_MS)
            for name, page in pages.items()
        },
    }
    payload = {
        "params": {
            "rows": args.rows,
            "repeats": args.repeats,
            "shards": args.shards,
            "window": "last 24 h (rows over the last 23 h)",
            "cases": CASES,
        },
        "assets": assets,
        "first_page": pages,
        "verdicts": verdicts,
    }
    json_path, png_path = write_results(
        "console", payload, plot(payload), mode=mode_of(parser, args)
    )
    print()
    for name, outcome in verdicts.items():
        if outcome["met"]:
            print(f"{name}: {outcome['value']:,} (budget {outcome['target']:,}): met")
        else:
            value, budget = outcome["value"], outcome["target"]
            print(f"SHORTFALL {name}: {value:,} where the budget is {budget:,}")
    print(f"wrote {json_path} and {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
