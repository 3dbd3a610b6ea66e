"""Compaction is on by default (SHARDLOG_COMPACTION__ENABLED): a router whose shard lacks the
shardlog_segments extension starts and serves as before; its job skips that shard, counts no
failure, says so once in its log and on /metrics, and compacts the shard's closed days once
the extension is created there."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from router.auth.scopes import SCOPES, SYSTEM_TENANT
from router.cluster_defaults import DATABASE
from router.settings import CompactionSettings, Settings
from services.cluster import LocalCluster
from services.router_process import RouterProcess
from tests.integration.test_search import post
from tests.support import (
    bearer,
    cluster_of_its_own,
    eventually,
    issue_token,
    past_day,
    running_router,
    settings_env,
)

CODEC = "shardlog_segments"
SKIPPED = "shardlog_compaction_shards_without_codec"


@pytest.fixture(scope="module")
def bare_cluster(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Settings, LocalCluster]]:
    """One shard, migrated, whose extension is then dropped: a server without the codec."""
    root: Path = tmp_path_factory.mktemp("without-codec")
    with cluster_of_its_own(root, shards=1, groups=1) as (own, cluster):
        cluster.shards[0].psql(DATABASE, f"DROP EXTENSION {CODEC}")
        yield own, cluster


def metric(router: RouterProcess, name: str) -> float | None:
    text = httpx.get(f"{router.url}/metrics", timeout=10).text
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else None


def test_compaction_is_on_by_default() -> None:
    assert CompactionSettings().enabled is True


def test_a_router_skips_a_shard_without_the_codec_until_it_has_it(
    bare_cluster: tuple[Settings, LocalCluster], tmp_path: Path
) -> None:
    own, cluster = bare_cluster
    shard = cluster.shards[0]
    # The job as configured by default, only quicker: ENABLED is left unset.
    env = {k: v for k, v in settings_env(own).items() if not k.startswith("SHARDLOG_COMPACTION__")}
    env |= {"SHARDLOG_COMPACTION__INTERVAL_S": "0.2", "SHARDLOG_COMPACTION__CLEAR_AFTER_S": "0"}
    day = past_day(2, 0)
    rows = [
        {"owner": "bare", "ts": (day + timedelta(minutes=i)).isoformat(), "content": f"bare {i}"}
        for i in range(20)
    ]
    span = {"owner": "bare", "from": day.isoformat(), "to": (day + timedelta(days=1)).isoformat()}
    token = issue_token(own, SYSTEM_TENANT, SCOPES, name="without codec")
    router = RouterProcess(tmp_path / "router", own.server.host, own.server.port, env=env)
    with (
        running_router(router),
        httpx.Client(base_url=router.url, timeout=30, headers=bearer(token)) as api,
    ):
        post(api, "/v1/audit", rows)
        eventually(lambda: metric(router, SKIPPED) == 1, timeout=20)
        assert httpx.get(f"{router.url}/health/ready", timeout=10).status_code == 200
        state: dict[str, Any] = api.get("/v1/admin/compaction", params={"owner": "bare"}).json()
        assert state["without_codec"] == [shard.spec.name] and state["owner_days"] == [], state
        assert [i["content"] for i in api.get("/v1/audit/search", params=span).json()["items"]] == [
            r["content"] for r in rows
        ]

        shard.psql(DATABASE, f"CREATE EXTENSION {CODEC}")
        eventually(lambda: metric(router, SKIPPED) == 0, timeout=20)
        done = eventually(
            lambda: (
                {
                    o["state"]
                    for o in api.get("/v1/admin/compaction", params={"owner": "bare"}).json()[
                        "owner_days"
                    ]
                }
                == {"done"}
            ),
            timeout=30,
        )
        assert done
        assert [i["content"] for i in api.get("/v1/audit/search", params=span).json()["items"]] == [
            r["content"] for r in rows
        ]
        assert metric(router, "shardlog_compaction_failures_total") == 0
    log = router.log_file.read_text()
    assert log.count(f"compaction skips {shard.spec.name}: no {CODEC} extension") == 1, log[-3000:]
    assert f"every shard has the {CODEC} extension now" in log
