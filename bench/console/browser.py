"""Headless Debian chromium driven by selenium, shared by bench/console and the browser tests
(tests/console): the browser itself, signing in to the console, and the time from submitting
the audit search form to its first rows on screen, measured inside the page.

Selenium never looks for or downloads a driver: the chromium and chromedriver of the Debian
packages (`make install` puts them there) are named outright."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.wait import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WINDOW = (1400, 1000)
# Two cores are shared with the shards and the router: generous, a wait ends as soon as it can.
WAIT_S = 20.0

# Submits #audit-form as filled in and answers (asynchronously) the milliseconds until its
# first page's rows are in the table and painted: a MutationObserver sees the rows arrive,
# the next animation frame is when they are on screen. Measured by the page's own clock, so
# that no WebDriver round trip counts.
_SUBMIT_TO_ROWS = """
const done = arguments[arguments.length - 1];
const form = document.querySelector("#audit-form");
const body = document.querySelector("#audit-table tbody");
const started = performance.now();
const observer = new MutationObserver(() => {
  if (!body.querySelector("tr.row")) return;
  observer.disconnect();
  requestAnimationFrame(() => done(performance.now() - started));
});
observer.observe(body, { childList: true });
form.requestSubmit();
"""


def start_browser() -> WebDriver:
    """Headless chromium with a fixed window, its console log kept for the artifacts of a
    failing test. --no-sandbox: the tests and benchmarks run as root."""
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.is_file()]
    if missing:
        raise RuntimeError(f"missing {', '.join(missing)}: `make install` installs them")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        "--disable-extensions",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    browser = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    browser.set_script_timeout(WAIT_S)
    return browser


def wait(browser: WebDriver, timeout: float = WAIT_S) -> WebDriverWait[WebDriver]:
    return WebDriverWait(browser, timeout)


def console_login(browser: WebDriver, url: str, token: str) -> None:
    """Open the console at ``url`` (the router's), sign out whoever was signed in (the token
    lives in the tab's session storage), sign in with ``token`` and wait until the page says
    who that is (#identity)."""
    browser.get(f"{url}/ui/")
    browser.execute_script("sessionStorage.clear()")
    browser.get(f"{url}/ui/")
    field = wait(browser).until(expected_conditions.visibility_of_element_located((By.ID, "token")))
    field.send_keys(token)
    browser.find_element(By.CSS_SELECTOR, "#login button[type=submit]").click()
    wait(browser).until(lambda b: b.find_element(By.ID, "identity").text.strip())


def fill(browser: WebDriver, form: str, values: dict[str, str]) -> None:
    """Set inputs, textareas and selects of ``form`` (a CSS selector) by name, as typed."""
    browser.execute_script(
        """
        const form = document.querySelector(arguments[0]);
        for (const [name, value] of Object.entries(arguments[1])) {
          const input = form.elements.namedItem(name);
          input.value = value;
          input.dispatchEvent(new Event("change", { bubbles: true }));
        }
        """,
        form,
        values,
    )


def first_page_ms(browser: WebDriver, url: str, values: dict[str, str]) -> float:
    """Milliseconds from submitting the audit form filled with ``values`` to its first page's
    rows on screen, from a freshly loaded audit view (signed in already: the session storage
    keeps the token across loads of the tab)."""
    browser.get(f"{url}/ui/?view=audit")
    wait(browser).until(expected_conditions.visibility_of_element_located((By.ID, "audit-form")))
    fill(browser, "#audit-form", values)
    elapsed: Any = browser.execute_async_script(_SUBMIT_TO_ROWS)
    return float(elapsed)
