"""The console's weight against its budget (300 KB gzip): the files compressed, what the
router sends for them, and what the browser loaded for the page, all from this router."""

from __future__ import annotations

from urllib.parse import urlsplit

from bench.console.assets import BUDGET_GZIP_BYTES, files, gzip_sizes, sent_sizes
from bench.console.browser import console_login

_LOADED = """
return [...performance.getEntriesByType("navigation"), ...performance.getEntriesByType("resource")]
  .map((entry) => [entry.name, entry.encodedBodySize]);
"""


def test_the_assets_fit_the_budget_as_files_as_sent_and_as_loaded(
    browser, router_process, api_token
):
    names = files()
    assert "index.html" in names and "app.css" in names
    assert sum(gzip_sizes().values()) <= BUDGET_GZIP_BYTES
    sent = sent_sizes(router_process.url, names)
    assert sum(sent.values()) <= BUDGET_GZIP_BYTES, sent

    # Every file over the network (earlier tests left them in the cache: 0 bytes loaded).
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
    try:
        console_login(browser, router_process.url, api_token)
        loaded = browser.execute_script(_LOADED)
    finally:
        browser.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": False})
        browser.execute_cdp_cmd("Network.disable", {})
    origin = urlsplit(router_process.url).netloc
    static = {}
    for address, size in loaded:
        parts = urlsplit(address)
        assert parts.netloc == origin, f"{address} is from elsewhere"
        if parts.path.startswith("/ui/"):
            static[parts.path.removeprefix("/ui/") or "index.html"] = size
    assert set(static) == set(names), "the page loads every file of the console, no other"
    assert static == sent, "the browser loaded what the router sends, gzip"
    assert sum(static.values()) <= BUDGET_GZIP_BYTES, static
