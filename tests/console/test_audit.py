"""The audit view in a real browser against the session's router and shards: search, paging by
the API's cursors, a row's detail, the URL as the state (reload, Back), an API error shown on
its field, the live tail, and the first page's time against its budget."""

from __future__ import annotations

import json
import statistics

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from bench.console.browser import console_login, first_page_ms
from tests.console.page import (
    column,
    hidden,
    open_view,
    query,
    recent,
    rows,
    shown,
    submit,
    unique,
    until,
    write_audit,
)

CONTENT = 3  # the Content column of #audit-table
FIRST_PAGE_BUDGET_MS = 1000.0


def test_search_pages_older_and_opens_a_row_with_its_attrs(browser, router_process, api, api_token):
    owner = unique("ui-page")
    write_audit(
        api,
        [
            {"owner": owner, "ts": recent(60 - i), "content": f"event {i:02d}", "attrs": {"n": i}}
            for i in range(30)
        ],
    )
    console_login(browser, router_process.url, api_token)
    open_view(browser, router_process.url, "audit")
    submit(browser, "#audit-form", {"owner": owner, "range": "1h", "limit": "10"})

    newest = [f"event {i:02d}" for i in range(29, 19, -1)]
    until(browser, lambda: column(browser, "#audit-table", CONTENT) == newest, "the newest 10")
    assert browser.find_element(By.ID, "audit-older").is_enabled()
    assert not browser.find_element(By.ID, "audit-newer").is_enabled()
    # The first page comes with the planner's estimate (or, for a day table no ANALYZE has
    # seen yet, its rows counted); the exact count on demand.
    counted = browser.find_element(By.ID, "audit-count").text
    assert counted.startswith("≈ ") or counted == "30 rows", counted
    browser.find_element(By.ID, "audit-count-exact").click()
    until(browser, lambda: browser.find_element(By.ID, "audit-count").text == "30 rows", "30")

    browser.find_element(By.ID, "audit-older").click()
    older = [f"event {i:02d}" for i in range(19, 9, -1)]
    until(browser, lambda: column(browser, "#audit-table", CONTENT) == older, "the next 10")
    assert query(browser)["cursor"]
    assert browser.find_element(By.ID, "audit-newer").is_enabled()

    first = browser.find_element(By.CSS_SELECTOR, "#audit-table tbody tr.row")
    first.click()
    shown(browser, "#row-detail")
    row = json.loads(browser.find_element(By.ID, "row-json").text)
    assert (row["owner"], row["content"], row["attrs"]) == (owner, "event 19", {"n": 19})
    assert query(browser)["row"] == [first.get_dom_attribute("data-ref")]

    browser.find_element(By.ID, "row-close").click()
    until(browser, lambda: hidden(browser, "#row-detail"), "the detail closed")
    # Keyboard: a row is focusable and Enter opens it.
    second = browser.find_elements(By.CSS_SELECTOR, "#audit-table tbody tr.row")[1]
    second.send_keys(Keys.ENTER)
    until(browser, lambda: not hidden(browser, "#row-detail"), "the detail opened by Enter")
    until(browser, lambda: '"event 18"' in browser.find_element(By.ID, "row-json").text, "row 18")
    browser.switch_to.active_element.send_keys(Keys.ESCAPE)
    until(browser, lambda: hidden(browser, "#row-detail"), "Escape closed it")

    browser.find_element(By.ID, "audit-newer").click()
    until(browser, lambda: column(browser, "#audit-table", CONTENT) == newest, "back to the newest")
    assert not browser.find_element(By.ID, "audit-newer").is_enabled()


def test_the_url_carries_the_query_through_reload_and_back(browser, router_process, api, api_token):
    owner = unique("ui-url")
    write_audit(
        api,
        [
            {"owner": owner, "ts": recent(30), "content": f"{word} {i}"}
            for i in range(3)
            for word in ("alpha", "beta")
        ],
    )
    console_login(browser, router_process.url, api_token)
    open_view(browser, router_process.url, "audit")
    submit(browser, "#audit-form", {"owner": owner, "range": "1h", "q": "alpha"})
    alphas = sorted(f"alpha {i}" for i in range(3))
    until(browser, lambda: sorted(column(browser, "#audit-table", CONTENT)) == alphas, "alpha rows")
    state = query(browser)
    assert (state["view"], state["owner"], state["q"], state["range"]) == (
        ["audit"],
        [owner],
        ["alpha"],
        ["1h"],
    )
    assert api_token not in browser.current_url

    browser.refresh()
    until(
        browser,
        lambda: sorted(column(browser, "#audit-table", CONTENT)) == alphas,
        "alpha rows again",
    )
    form = browser.find_element(By.ID, "audit-form")
    assert form.find_element(By.NAME, "owner").get_property("value") == owner
    assert form.find_element(By.NAME, "q").get_property("value") == "alpha"
    assert form.find_element(By.NAME, "range").get_property("value") == "1h"

    submit(browser, "#audit-form", {"q": "beta"})
    betas = sorted(f"beta {i}" for i in range(3))
    until(browser, lambda: sorted(column(browser, "#audit-table", CONTENT)) == betas, "beta rows")
    browser.back()
    until(
        browser, lambda: sorted(column(browser, "#audit-table", CONTENT)) == alphas, "Back: alpha"
    )
    assert browser.find_element(By.NAME, "q").get_property("value") == "alpha"
    browser.forward()
    until(
        browser, lambda: sorted(column(browser, "#audit-table", CONTENT)) == betas, "Forward: beta"
    )


def test_an_api_error_is_shown_on_the_field_it_names(browser, router_process, api, api_token):
    owner = unique("ui-error")
    write_audit(api, [{"owner": owner, "ts": recent(10), "content": "a (paren"}])
    console_login(browser, router_process.url, api_token)
    open_view(browser, router_process.url, "audit")
    submit(browser, "#audit-form", {"owner": owner, "range": "1h", "q": "(", "match": "regex"})

    banner = shown(browser, "#error")
    assert banner.get_dom_attribute("role") == "alert"
    assert banner.text.endswith("(q)"), banner.text
    pattern = browser.find_element(By.CSS_SELECTOR, "#audit-form [name=q]")
    assert pattern.get_dom_attribute("aria-invalid") == "true"
    assert browser.switch_to.active_element == pattern

    submit(browser, "#audit-form", {"q": "(", "match": "substring"})
    until(browser, lambda: column(browser, "#audit-table", CONTENT) == ["a (paren"], "the row")
    assert hidden(browser, "#error")
    assert pattern.get_dom_attribute("aria-invalid") is None


def test_a_row_written_during_the_test_appears_in_the_live_tail(
    browser, router_process, api, api_token
):
    owner = unique("ui-tail")
    write_audit(api, [{"owner": owner, "ts": recent(5), "content": "before the tail"}])
    console_login(browser, router_process.url, api_token)
    open_view(browser, router_process.url, "audit")
    submit(browser, "#audit-form", {"owner": owner, "range": "15m"})
    until(
        browser, lambda: column(browser, "#audit-table", CONTENT) == ["before the tail"], "the row"
    )

    browser.find_element(By.ID, "audit-tail").click()
    until(browser, lambda: browser.find_element(By.ID, "audit-tail-status").text == "live", "live")
    assert query(browser)["tail"] == ["true"]
    write_audit(api, [{"owner": owner, "content": "arrived while tailing"}])
    until(
        browser,
        lambda: (
            [(r["tailed"], r["cells"][CONTENT]) for r in rows(browser, "#audit-table")]
            == [(True, "arrived while tailing"), (False, "before the tail")]
        ),
        "the new row on top, marked as tailed",
    )

    browser.find_element(By.ID, "audit-tail").click()
    until(browser, lambda: browser.find_element(By.ID, "audit-tail-status").text == "", "tail off")
    assert "tail" not in query(browser)


def test_the_first_page_renders_within_its_budget(browser, router_process, api, api_token):
    owner = unique("ui-speed")
    write_audit(
        api,
        [
            {"owner": owner, "ts": recent(i * 0.5), "content": f"user {i} did something"}
            for i in range(2000)
        ],
    )
    console_login(browser, router_process.url, api_token)
    values = {"owner": owner, "range": "1h"}
    first_page_ms(browser, router_process.url, values)  # warm-up
    times = [first_page_ms(browser, router_process.url, values) for _ in range(3)]
    assert len(column(browser, "#audit-table", CONTENT)) == 50
    assert statistics.median(times) <= FIRST_PAGE_BUDGET_MS, times


def test_a_link_without_order_or_limit_shows_what_the_form_says(
    browser, router_process, api, api_token
):
    """A shared link may name only the owner and the window (docs/operations.md's example):
    the page then holds what the form shows, newest first and 50 rows (the API's own defaults
    are oldest first and 100)."""
    owner = unique("ui-link")
    write_audit(
        api,
        [{"owner": owner, "ts": recent(120 - i), "content": f"line {i:03d}"} for i in range(60)],
    )
    console_login(browser, router_process.url, api_token)
    browser.get(f"{router_process.url}/ui/?view=audit&owner={owner}&range=1h")
    newest = [f"line {i:03d}" for i in range(59, 9, -1)]
    until(browser, lambda: column(browser, "#audit-table", CONTENT), "rows")
    form = browser.find_element(By.ID, "audit-form")
    assert form.find_element(By.NAME, "order").get_property("value") == "desc"
    assert form.find_element(By.NAME, "limit").get_property("value") == "50"
    assert column(browser, "#audit-table", CONTENT) == newest
