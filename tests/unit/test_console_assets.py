"""The console's static files as the router serves them (no database needed): headers that keep
the page to its origin, gzip and ETags, every file the page refers to present and shipped in the
package, nothing loaded from elsewhere, and the whole under its size budget."""

from __future__ import annotations

import gzip
import re
import tomllib
from collections.abc import Iterator
from fnmatch import fnmatch
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from router.api.console import SECURITY_HEADERS, assets
from router.app import create_app
from router.settings import Settings

UI = Path(__file__).resolve().parents[2] / "router" / "ui"
ROOT = UI.parents[1]
BUDGET_GZIP_BYTES = 300 * 1024


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    # Not entered as a context manager: no lifespan, so no catalog is needed for static files.
    yield TestClient(create_app(Settings()), follow_redirects=False)


def test_the_console_root_redirects_to_its_index(client: TestClient) -> None:
    response = client.get("/ui")
    assert response.status_code == 308
    assert response.headers["location"] == "/ui/"


def test_index_is_served_with_headers_that_keep_it_to_this_origin(client: TestClient) -> None:
    response = client.get("/ui/", headers={"accept-encoding": "identity"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.content == (UI / "index.html").read_bytes()
    for name, value in SECURITY_HEADERS.items():
        assert response.headers[name] == value
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy


def test_gzip_is_the_same_file_and_an_etag_answers_304(client: TestClient) -> None:
    plain = client.get("/ui/js/search.js", headers={"accept-encoding": "identity"})
    zipped = client.get("/ui/js/search.js", headers={"accept-encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip"
    assert zipped.content == plain.content  # httpx decodes it
    assert int(zipped.headers["content-length"]) < len(plain.content)
    assert plain.headers["content-type"].startswith("text/javascript")
    again = client.get("/ui/js/search.js", headers={"if-none-match": plain.headers["etag"]})
    assert again.status_code == 304 and again.content == b""
    head = client.head("/ui/app.css", headers={"accept-encoding": "identity"})
    assert head.status_code == 200 and head.content == b""
    assert int(head.headers["content-length"]) == len((UI / "app.css").read_bytes())


@pytest.mark.parametrize(
    "path", ["/ui/nope.js", "/ui/%2E%2E%2Fapp.py", "/ui/__init__.py", "/ui/js"]
)
def test_anything_else_is_a_404_naming_the_path(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404
    assert response.json()["error"]["field"] == "path"


def test_a_long_unknown_path_is_not_echoed_back(client: TestClient) -> None:
    response = client.get("/ui/" + "x" * 5000)
    assert response.status_code == 404
    assert len(response.text) < 400


def _references() -> Iterator[tuple[str, str]]:
    """(file, what it refers to) for every script, style sheet and module import."""
    index = (UI / "index.html").read_text()
    for target in re.findall(r'(?:src|href)="(/ui/[^"]+)"', index):
        yield "index.html", target.removeprefix("/ui/")
    for script in sorted((UI / "js").glob("*.js")):
        for target in re.findall(r'from "\./([^"]+)"', script.read_text()):
            yield f"js/{script.name}", f"js/{target}"


def test_every_file_the_page_refers_to_is_served() -> None:
    served = assets()
    references = list(_references())
    assert len(references) > 10
    for source, target in references:
        assert target in served, f"{source} refers to {target}"


def test_every_served_file_is_used_and_shipped_in_the_package() -> None:
    served = set(assets())
    used = {"index.html"} | {target for _, target in _references()}
    assert served == used
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["router"]
    for name in served:
        assert any(fnmatch(f"ui/{name}", pattern) for pattern in globs), name


def test_nothing_is_loaded_from_another_origin() -> None:
    for name, asset in assets().items():
        text = asset.body.decode()
        assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", text), name
        assert "@import" not in text and "url(" not in text, name
        assert not re.search(r"""fetch\(\s*["'`]https?:""", text), name


def test_the_console_fits_its_size_budget() -> None:
    total = sum(len(gzip.compress(asset.body, 9)) for asset in assets().values())
    assert total <= BUDGET_GZIP_BYTES, f"{total} bytes gzip over the {BUDGET_GZIP_BYTES} budget"
