"""What the browser tests read off the console and write through the API: the rows a results
table shows, the URL's query, a form filled and submitted, rows written for a test's own
owner or switch."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import httpx
import orjson
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support import expected_conditions

from bench.console.browser import fill, wait
from tests.support import real_now

T = TypeVar("T")

_ROWS = """
return [...document.querySelectorAll(arguments[0] + " tbody tr.row")].map((row) => ({
  ref: row.dataset.ref,
  tailed: row.classList.contains("tailed"),
  cells: [...row.cells].map((cell) => cell.textContent),
}));
"""


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def open_view(browser: WebDriver, url: str, view: str) -> None:
    """The console at ?view=<view> (signed in already), once that view shows."""
    browser.get(f"{url}/ui/?view={view}")
    shown(browser, f"#{view}-view")


def shown(browser: WebDriver, selector: str) -> WebElement:
    located = (By.CSS_SELECTOR, selector)
    element: WebElement = wait(browser).until(
        expected_conditions.visibility_of_element_located(located)
    )
    return element


def submit(browser: WebDriver, form: str, values: dict[str, str]) -> None:
    """Fill ``form`` (a CSS selector) by input name and press its submit button."""
    fill(browser, form, values)
    browser.find_element(By.CSS_SELECTOR, f"{form} button[type=submit]").click()


def rows(browser: WebDriver, table: str) -> list[dict[str, Any]]:
    """Every ``tr.row`` of ``table``: its data-ref, whether the tail added it, its cells' text."""
    found: list[dict[str, Any]] = browser.execute_script(_ROWS, table)
    return found


def column(browser: WebDriver, table: str, index: int) -> list[str]:
    return [row["cells"][index] for row in rows(browser, table)]


def until(browser: WebDriver, check: Callable[[], T | None], what: str) -> T:
    """Wait until ``check`` answers something truthy; ``what`` says what was awaited."""
    result: T = wait(browser).until(lambda _: check(), message=what)
    return result


def query(browser: WebDriver) -> dict[str, list[str]]:
    """The console's URL query (its state)."""
    return parse_qs(urlsplit(browser.current_url).query)


def hidden(browser: WebDriver, selector: str) -> bool:
    return browser.find_element(By.CSS_SELECTOR, selector).get_dom_attribute("hidden") is not None


def write_audit(api: httpx.Client, records: list[dict[str, Any]]) -> None:
    response = api.post(
        "/v1/audit",
        content=b"".join(orjson.dumps(record) + b"\n" for record in records),
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.status_code == 200, response.text


def write_flows(api: httpx.Client, records: list[dict[str, Any]]) -> None:
    response = api.post("/v1/flows", json=records)
    assert response.status_code == 200, response.text


def recent(seconds_ago: float) -> str:
    """A ``ts`` in the console's default ranges: they end at the browser's clock, the
    machine's real one (not a shifted test clock)."""
    return (real_now() - timedelta(seconds=seconds_ago)).isoformat()


_CELLS = """
return [...document.querySelectorAll(arguments[0] + " tbody tr")]
  .filter((row) => !row.querySelector("td.hint"))
  .map((row) => [...row.cells].map((cell) => cell.textContent));
"""


def cells(browser: WebDriver, table: str) -> list[list[str]]:
    """The text of the cells of every body row of ``table`` (a CSS selector), leaving out a
    hint that stands for no rows ("No day tables.")."""
    found: list[list[str]] = browser.execute_script(_CELLS, table)
    return found
