"""The web console's static files (router/ui/), served at /ui.

The files are read once, from the installed package, and kept with their gzip form and an
ETag. They hold no data and need no token: the page asks for one and sends it with every /v1
call it makes. The headers keep the page to this origin: scripts, styles and connections only
from here, never framed, no referrer sent along."""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import dataclass
from functools import cache
from importlib import resources

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse

from router.errors import NotFound

router = APIRouter(include_in_schema=False)

PACKAGE = "router.ui"
INDEX = "index.html"
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # Revalidated on every load (an ETag answers 304): a new release is seen at once.
    "Cache-Control": "no-cache",
}


@dataclass(frozen=True, slots=True)
class Asset:
    content_type: str
    body: bytes
    gzipped: bytes
    etag: str


@cache
def assets() -> dict[str, Asset]:
    """Every file under router/ui by its path there ("index.html", "js/api.js")."""
    found: dict[str, Asset] = {}
    root = resources.files(PACKAGE)
    pending = [(root, "")]
    while pending:
        folder, prefix = pending.pop()
        for entry in folder.iterdir():
            name = f"{prefix}{entry.name}"
            if entry.is_dir():
                pending.append((entry, f"{name}/"))
                continue
            suffix = name[name.rfind(".") :] if "." in name else ""
            content_type = CONTENT_TYPES.get(suffix)
            if content_type is None:
                continue
            body = entry.read_bytes()
            etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
            found[name] = Asset(content_type, body, gzip.compress(body, 9, mtime=0), etag)
    return found


@router.get("/ui")
async def console_root() -> RedirectResponse:
    return RedirectResponse("/ui/", status_code=308)


@router.api_route("/ui/{path:path}", methods=["GET", "HEAD"])
async def console_file(path: str, request: Request) -> Response:
    asset = assets().get(path or INDEX)
    if asset is None:
        raise NotFound(f"the console has no file {path[:100]!r}", "path")
    headers = {**SECURITY_HEADERS, "ETag": asset.etag, "Vary": "Accept-Encoding"}
    if asset.etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    body = asset.body
    if "gzip" in request.headers.get("accept-encoding", ""):
        body = asset.gzipped
        headers["Content-Encoding"] = "gzip"
    if request.method == "HEAD":
        headers["Content-Length"] = str(len(body))
        return Response(status_code=200, headers=headers, media_type=asset.content_type)
    return Response(body, headers=headers, media_type=asset.content_type)
