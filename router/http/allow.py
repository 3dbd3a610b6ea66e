"""The Allow header of a 405: every method the OpenAPI schema documents for the path.
Starlette answers with the methods of the first route whose path matched, and FastAPI makes one
route per operation, so a path with GET and POST said `Allow: GET` alone."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

HTTP_METHODS = frozenset({"get", "put", "post", "delete", "patch", "head", "options", "trace"})


@lru_cache(maxsize=512)
def _template(path: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[^}]+\})", path)
    return re.compile("".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts))


def allowed_methods(paths: Mapping[str, Mapping[str, Any]], path: str) -> Iterable[str]:
    """The methods documented for ``path`` (a request's), HEAD wherever GET is (Starlette
    answers it); empty if no documented path matches."""
    methods: set[str] = set()
    for template, operations in paths.items():
        if _template(template).fullmatch(path):
            methods |= {m.upper() for m in operations if m in HTTP_METHODS}
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)
