"""What the deployment tests (compose, Ansible hosts) ask of a deployed cluster about compacted
days: each PostgreSQL node has the shardlog_segments extension of this checkout, and a closed
day compacted with `shardlog compact` is searched as before."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
import orjson

from tests.support import REPO, past_day

CODEC = "shardlog_segments"
# Run on a node of a shard: the version created in the database (empty when not created) and
# the version the node's files offer (empty when it has none), as "created|available".
CODEC_SQL = (
    f"SELECT coalesce((SELECT extversion FROM pg_extension WHERE extname = '{CODEC}'), '') "
    f"|| '|' || coalesce((SELECT default_version FROM pg_available_extensions "
    f"WHERE name = '{CODEC}'), '')"
)
ROWS = 300


def checkout_codec_version() -> str:
    """The version this checkout's extension installs (its control file's default_version)."""
    control = (REPO / "native" / "pg_segments" / f"{CODEC}.control").read_text()
    found = re.search(r"^default_version\s*=\s*'([^']+)'", control, re.MULTILINE)
    assert found, control
    return found.group(1)


def assert_codec_created(answers: dict[str, str]) -> None:
    """``answers``: node name -> CODEC_SQL's output there. Each node has this checkout's
    extension on disk and created in its shard's database."""
    version = checkout_codec_version()
    wrong = {node: answer for node, answer in answers.items() if answer != f"{version}|{version}"}
    assert answers and not wrong, f"expected {version}|{version} (created|available): {wrong}"


def assert_a_closed_day_compacts_unchanged(
    client: httpx.Client, compact: Callable[[str], str]
) -> None:
    """Rows of a past (closed) day go in through ``client``'s router; ``compact(owner)`` runs
    `shardlog compact --json --owner <owner> --clear-now` where the router runs and returns its
    output. Every owner-day is then done, and searches answer what was written, as before."""
    owner = f"packed-{uuid.uuid4().hex[:8]}"
    day = past_day(2, 0)
    span = {"from": day.isoformat(), "to": (day + timedelta(days=1)).isoformat()}
    contents = [f"packed row {i} {'rare-word' if i % 50 == 7 else 'common'}" for i in range(ROWS)]
    lines = b"".join(
        orjson.dumps(
            {"owner": owner, "ts": (day + timedelta(hours=6, seconds=i)).isoformat(), "content": c}
        )
        + b"\n"
        for i, c in enumerate(contents)
    )
    posted = client.post(
        "/v1/audit", content=lines, headers={"content-type": "application/x-ndjson"}
    )
    assert posted.json() == {"accepted": ROWS}, posted.text
    searches = [
        {"owner": owner, **span, "limit": 1000, "count": "exact"},
        {"owner": owner, **span, "q": "rare-word", "order": "desc", "count": "exact"},
    ]
    before = [_search(client, params) for params in searches]
    assert [item["content"] for item in before[0]["items"]] == contents
    rare = [c for c in reversed(contents) if "rare-word" in c]
    assert [item["content"] for item in before[1]["items"]] == rare
    assert before[0]["count"]["value"] == ROWS and before[1]["count"]["value"] == len(rare)

    survey = _compaction_state(client, owner)
    assert survey["without_codec"] == [] and survey["unreachable"] == {}, survey
    assert {o["state"] for o in survey["owner_days"]} == {"copy"}, survey

    report = json.loads(compact(owner))
    assert report["without_codec"] == [], report
    assert {o["state"] for o in report["owner_days"]} == {"done"}, report
    assert sum(o["rows"] for o in report["owner_days"]) == ROWS, report
    assert {o["state"] for o in _compaction_state(client, owner)["owner_days"]} == {"done"}
    assert [_search(client, params) for params in searches] == before


def _search(client: httpx.Client, params: dict[str, Any]) -> dict[str, Any]:
    """A search's rows and count (its cursors are signed anew on each answer)."""
    found = client.get("/v1/audit/search", params=params)
    assert found.status_code == 200, found.text
    page = found.json()
    return {"items": page["items"], "count": page.get("count")}


def _compaction_state(client: httpx.Client, owner: str) -> dict[str, Any]:
    state = client.get("/v1/admin/compaction", params={"owner": owner})
    assert state.status_code == 200, state.text
    shown: dict[str, Any] = state.json()
    return shown
