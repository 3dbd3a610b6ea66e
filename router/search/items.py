"""Rows as the API shows them: timestamps as RFC 3339 text, attrs as JSON, flows' first_seen
under its own name (the queries read it as ts, the key they order by)."""

from __future__ import annotations

from typing import Any

import orjson

from router.search.merge import Row


def public(row: Row) -> dict[str, Any]:
    return shown(dict(row))


def shown(out: dict[str, Any]) -> dict[str, Any]:
    """``public`` in place: for a dict of the caller's own."""
    if "attrs" in out:
        out["attrs"] = orjson.loads(out["attrs"]) if out["attrs"] is not None else None
    if "last_seen" in out:
        out["first_seen"] = out.pop("ts").isoformat()
        out["last_seen"] = out["last_seen"].isoformat()
    else:
        out["ts"] = out["ts"].isoformat()
    return out
