"""The console (/ui) in a real browser: one headless chromium for the session, driven against
the session's router and shards. A failing test leaves its screenshot, page source and the
browser's console log under tests/artifacts/ (git-ignored)."""

from __future__ import annotations

import json
import re
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.webdriver import WebDriver

from bench.console.browser import start_browser
from tests.support import REPO

ARTIFACTS = REPO / "tests" / "artifacts"


@pytest.fixture(scope="session")
def browser() -> Iterator[WebDriver]:
    driver = start_browser()
    try:
        yield driver
    finally:
        driver.quit()


def save_artifacts(browser: WebDriver, name: str, folder: Path = ARTIFACTS) -> list[Path]:
    """The page as the browser shows it: <name>.png, .html and .log (its console, one JSON
    object a line). A browser that broke leaves what it still can."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / re.sub(r"[^\w.-]+", "_", name)
    saved = []
    attempts = (
        (".png", lambda path: browser.save_screenshot(str(path))),
        (".html", lambda path: path.write_text(browser.page_source)),
        (
            ".log",
            lambda path: path.write_text(
                "".join(json.dumps(entry) + "\n" for entry in browser.get_log("browser"))
            ),
        ),
    )
    for suffix, save in attempts:
        path = stem.with_suffix(suffix)
        try:
            save(path)
        except (WebDriverException, OSError) as error:
            path.with_suffix(f"{suffix}.error").write_text(f"{error}\n")
            continue
        saved.append(path)
    return saved


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    driver = getattr(item, "funcargs", {}).get("browser")
    if report.failed and report.when in ("setup", "call") and driver is not None:
        saved = save_artifacts(driver, item.name)
        report.sections.append(("browser artifacts", "\n".join(str(p) for p in saved)))
    return report


@pytest.fixture(autouse=True)
def _console_log_of_this_test(browser: WebDriver) -> None:
    """The console log saved for a failing test is its own: what earlier tests left is read
    and dropped first."""
    browser.get_log("browser")
