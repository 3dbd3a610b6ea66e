"""The console's weight: each file under router/ui/ compressed by gzip -9 (the Python package
marker aside: the router never serves it), and the bytes a router actually sends for each when
the client accepts gzip."""

from __future__ import annotations

import gzip
from pathlib import Path

import httpx

import router

UI = Path(router.__file__).parent / "ui"
BUDGET_GZIP_BYTES = 300 * 1024


def files(folder: Path = UI) -> list[str]:
    """The console's files, by their path under router/ui/ ("index.html", "js/api.js")."""
    return sorted(
        str(path.relative_to(folder))
        for path in folder.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc")
    )


def gzip_sizes(folder: Path = UI) -> dict[str, int]:
    return {name: len(gzip.compress((folder / name).read_bytes(), 9)) for name in files(folder)}


def sent_sizes(url: str, names: list[str]) -> dict[str, int]:
    """Bytes of each file's body as the router at ``url`` sends it (Accept-Encoding: gzip),
    read off the wire, not decoded; a file sent without gzip is an error."""
    sizes = {}
    with httpx.Client(base_url=url, timeout=30, headers={"accept-encoding": "gzip"}) as http:
        for name in names:
            with http.stream("GET", f"/ui/{name}") as response:
                response.raise_for_status()
                if response.headers.get("content-encoding") != "gzip":
                    raise RuntimeError(f"/ui/{name} came without gzip")
                sizes[name] = sum(len(chunk) for chunk in response.iter_raw())
    return sizes
