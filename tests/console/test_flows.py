"""The flows view in a real browser: the top-talkers chart from the report API drawn over the
search's query, a click on a source's bar filtering the search to that source, and a click on
a bar of the time histogram narrowing the window to its bucket."""

from __future__ import annotations

from datetime import datetime, timedelta

from selenium.webdriver.common.by import By

from bench.console.browser import console_login
from tests.console.page import (
    column,
    open_view,
    query,
    recent,
    shown,
    submit,
    unique,
    until,
    write_flows,
)

SOURCE = 2  # the Source column of #flows-table ("address:port")
SOURCES = [f"10.77.0.{n}" for n in range(1, 6)]


def bars(browser, chart: str) -> list[str]:
    return [
        bar.get_dom_attribute("data-key")
        for bar in browser.find_elements(By.CSS_SELECTOR, f"{chart} svg rect.bar")
    ]


def test_top_talkers_render_and_a_click_filters_the_search(browser, router_process, api, api_token):
    switch = unique("ui-sw")
    # Source n sends (6 - n) flows of 1000 * (6 - n) bytes each: 10.77.0.1 talks the most.
    write_flows(
        api,
        [
            {
                "switch": switch,
                "src_ip": source,
                "dst_ip": "192.0.2.10",
                "src_port": 40000 + flow,
                "dst_port": 443,
                "proto": 6,
                "bytes": 1000 * (6 - n),
                "packets": 2,
                "ts": recent(30),
            }
            for n, source in enumerate(SOURCES, start=1)
            for flow in range(6 - n)
        ],
    )
    console_login(browser, router_process.url, api_token)
    open_view(browser, router_process.url, "flows")
    submit(browser, "#flows-form", {"switch": switch, "range": "1h"})

    until(browser, lambda: len(column(browser, "#flows-table", SOURCE)) == 15, "15 flows")
    shown(browser, "#top-talkers svg")
    until(
        browser, lambda: bars(browser, "#top-talkers") == SOURCES, "one bar a source, largest first"
    )
    assert bars(browser, "#flow-histogram"), "the time histogram has bars"

    chosen = SOURCES[2]
    browser.find_element(By.CSS_SELECTOR, f'#top-talkers rect.bar[data-key="{chosen}"]').click()
    until(
        browser,
        lambda: (
            sorted(column(browser, "#flows-table", SOURCE))
            == [f"{chosen}:{40000 + flow}" for flow in range(3)]
        ),
        f"only {chosen}'s 3 flows",
    )
    assert query(browser)["src_ip"] == [chosen]
    assert (
        browser.find_element(By.CSS_SELECTOR, "#flows-form [name=src_ip]").get_property("value")
        == chosen
    )
    until(
        browser, lambda: bars(browser, "#top-talkers") == [chosen], "the chart follows the filter"
    )

    # A bar of the time histogram narrows the window to its bucket (1 minute in the last hour).
    bucket = bars(browser, "#flow-histogram")[0]
    browser.find_element(By.CSS_SELECTOR, f'#flow-histogram rect.bar[data-key="{bucket}"]').click()
    until(browser, lambda: query(browser).get("range") == ["custom"], "an absolute window")
    state = query(browser)
    start, end = (datetime.fromisoformat(state[name][0]) for name in ("from", "to"))
    assert start == datetime.fromisoformat(bucket) and end - start == timedelta(minutes=1)
    field = browser.find_element(By.CSS_SELECTOR, "#flows-form [name=from]")
    assert field.is_enabled() and field.get_property("value") == state["from"][0]
    until(
        browser,
        lambda: {s.split(":")[0] for s in column(browser, "#flows-table", SOURCE)} == {chosen},
        "the source's flows of that minute",
    )
