"""Retention and the per-owner lifecycle against the real cluster: time travel through the
CLI's --as-of, dry runs, the refusal rule, lock-safety, archive/restore, erase, export, and
drops racing searches and writes. Every run is scoped to the test's own owners, so the
session cluster's other tables are never candidates."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from bench.shard_view import catalog_shards, day_tables, owner_id, shard_sql
from router import clock
from router.settings import Settings
from tests.support import eventually, map_audit_owner, run_cli, search_items

# Pinned again at each test's start (``pinned_today``).
STARTED = clock.now()
TODAY = STARTED.date()
HOSTILE = 'tab\there, newline\nthere, back\\slash, quote\' "double", ünïcødé ✓'


@pytest.fixture(autouse=True)
def pinned_today() -> Iterator[date]:
    """The day a test works in, read from the clock once at its start; the retention runs it
    starts read that day too (``retention``), so a test that crosses midnight still agrees with
    them on what today is."""
    global STARTED, TODAY
    STARTED = clock.now()
    TODAY = STARTED.date()
    yield TODAY


def frozen_on_today() -> dict[str, str]:
    """A CLI process's clock frozen at the test's start."""
    return {"SHARDLOG_CLOCK__FROZEN_AT": STARTED.isoformat()}


def midnight(days_ago: int) -> datetime:
    return datetime.combine(TODAY - timedelta(days=days_ago), datetime.min.time(), UTC)


def new_owner(api, keep_days: int = 40, archive: bool = False) -> tuple[str, str]:
    key, group = map_audit_owner(api, "ret")
    set_policy(api, key, group, keep_days, archive)
    return key, group


def set_policy(api, key: str, group: str, keep_days: int, archive: bool = False) -> None:
    response = api.put(
        "/v1/admin/retention/policies",
        json={
            "kind": "audit",
            "group": group,
            "owner": key,
            "keep_days": keep_days,
            "archive": archive,
        },
    )
    assert response.status_code == 200, response.text


def write(api, key: str, days_ago: int, rows: int = 40, content: str = "row") -> None:
    base = midnight(days_ago)
    records = [
        {
            "owner": key,
            "ts": (base + timedelta(seconds=i)).isoformat(),
            "content": f"{content} {i}",
            "attrs": {"i": i, "text": content},
        }
        for i in range(rows)
    ]
    response = api.post(
        "/v1/audit",
        content=b"".join(orjson.dumps(r) + b"\n" for r in records),
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.status_code == 200, response.text


def days_held(api, key: str) -> dict[int, int]:
    """days ago -> exact rows, over every shard."""
    response = api.get("/v1/admin/tables", params={"owner": key, "kind": "audit", "exact": "true"})
    assert response.status_code == 200, response.text
    found: dict[int, int] = {}
    for table in response.json()["tables"]:
        ago = (TODAY - date.fromisoformat(table["day"])).days
        found[ago] = found.get(ago, 0) + table["rows"]
    return found


def retention(settings: Settings, key: str, *extra: str, env=None) -> tuple[int, dict]:
    env = {**frozen_on_today(), **(env or {})}
    result = run_cli(settings, "retention", "run", "--owner", key, "--json", *extra, env=env)
    assert result.stdout, result.stderr
    return result.returncode, json.loads(result.stdout)


def search_all(api, key: str, days: int = 30) -> list[dict]:
    midnight = datetime.combine(TODAY, datetime.min.time(), UTC)
    params = {
        "owner": key,
        "from": (midnight - timedelta(days=days)).isoformat(),
        "to": (midnight + timedelta(days=1)).isoformat(),
        "limit": 500,
    }
    return search_items(api, "audit", params)


def test_dry_run_changes_nothing(api, settings) -> None:
    key, group = new_owner(api)
    for ago in (0, 5, 20):
        write(api, key, ago)
    set_policy(api, key, group, 10)
    before = days_held(api, key)
    runs_before = api.get("/v1/admin/retention/runs", params={"limit": 1000}).json()
    code, report = retention(settings, key, "--dry-run")
    assert code == 0 and report["status"] == "dry_run"
    assert {d["outcome"] for d in report["drops"]} == {"would_drop"}
    assert {(TODAY - date.fromisoformat(d["day"])).days for d in report["drops"]} == {20}
    assert days_held(api, key) == before
    assert api.get("/v1/admin/retention/runs", params={"limit": 1000}).json() == runs_before


def test_time_travel_drops_each_day_when_it_expires_and_never_today(api, settings) -> None:
    key, group = new_owner(api)
    for ago in (0, 3, 8, 15):
        write(api, key, ago)
    set_policy(api, key, group, 10)
    code, report = retention(settings, key)
    assert code == 0 and report["status"] == "done"
    assert set(days_held(api, key)) == {0, 3, 8}
    assert {d["outcome"] for d in report["drops"]} == {"dropped"}
    assert sum(d["rows"] for d in report["drops"]) == 40

    as_of = (TODAY + timedelta(days=2)).isoformat()
    assert retention(settings, key, "--as-of", as_of)[1]["drops"] == []
    retention(settings, key, "--as-of", (TODAY + timedelta(days=5)).isoformat())
    assert set(days_held(api, key)) == {0, 3}
    code, report = retention(
        settings, key, "--as-of", (TODAY + timedelta(days=400)).isoformat(), "--force"
    )
    assert code == 0
    assert days_held(api, key) == {0: 40}
    assert [i["content"] for i in search_all(api, key)] == [f"row {i}" for i in range(40)]

    run = api.get(f"/v1/admin/retention/runs/{report['run_id']}").json()
    assert run["status"] == "done" and run["tables_dropped"] == len(run["drops"]) >= 1
    assert {d["owner"] for d in run["drops"]} == {key}
    history = run_cli(settings, "retention", "history", "--json")
    assert history.returncode == 0, history.stderr
    assert report["run_id"] in [r["id"] for r in json.loads(history.stdout)]


def test_a_run_that_would_drop_too_much_refuses_without_force(api, settings) -> None:
    key, group = new_owner(api)
    for ago in (1, 2, 3, 4):
        write(api, key, ago)
    set_policy(api, key, group, 1)
    held = days_held(api, key)
    code, report = retention(settings, key, "--as-of", (TODAY + timedelta(days=1)).isoformat())
    assert code == 3 and report["status"] == "refused"
    assert "MAX_DROP_SHARE" in report["message"] and "--force" in report["message"]
    assert days_held(api, key) == held
    refused = api.get(f"/v1/admin/retention/runs/{report['run_id']}").json()
    assert refused["status"] == "refused" and refused["drops"] == []
    code, report = retention(
        settings, key, "--as-of", (TODAY + timedelta(days=1)).isoformat(), "--force"
    )
    assert code == 0 and days_held(api, key) == {}


def test_a_locked_table_is_reported_and_retried_next_run(api, settings) -> None:
    key, group = new_owner(api)
    write(api, key, 12)
    write(api, key, 0)
    set_policy(api, key, group, 10)
    ident = owner_id(api, "audit", key)
    suffix = (TODAY - timedelta(days=12)).strftime("%Y%m%d")
    shard, old = next(
        (shard, table)
        for shard, tables in day_tables(api, "audit", ident).items()
        for table in tables
        if table.endswith(suffix)
    )
    dsn = catalog_shards(api)[shard]
    holder = subprocess.Popen(
        [
            "psql",
            "-X",
            "-q",
            "-d",
            dsn,
            "-c",
            f"BEGIN; LOCK TABLE {old} IN ACCESS SHARE MODE; SELECT pg_sleep(60); COMMIT",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        eventually(
            lambda: (
                shard_sql(
                    dsn,
                    f"SELECT count(*) FROM pg_locks WHERE relation = '{old}'::regclass AND granted",
                ).strip()
                == "1"
            )
        )
        started = time.monotonic()
        code, report = retention(
            settings,
            key,
            env={
                "SHARDLOG_RETENTION__LOCK_TIMEOUT_MS": "100",
                "SHARDLOG_RETENTION__DROP_ATTEMPTS": "2",
            },
        )
        assert time.monotonic() - started < 20
        assert code == 1 and report["status"] == "partial"
        failed = [d for d in report["drops"] if d["outcome"] == "failed"]
        assert [(d["shard"], d["table"]) for d in failed] == [(shard, old)]
        assert "locked" in failed[0]["error"]
        # Still searchable: the table went back into the registry.
        assert len(search_all(api, key)) == 80 - sum(
            d["rows"] for d in report["drops"] if d["outcome"] == "dropped"
        )
    finally:
        holder.terminate()
        holder.wait()
        # The server side of the killed psql would sleep on with its lock: end it.
        shard_sql(
            dsn,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE query LIKE '%LOCK TABLE {old}%' AND pid <> pg_backend_pid()",
        )
    code, report = retention(settings, key)
    assert code == 0
    assert days_held(api, key) == {0: 40}


def test_archive_then_drop_then_restore_gives_identical_searches(api, settings) -> None:
    key, group = new_owner(api, archive=True)
    write(api, key, 6, rows=120, content=HOSTILE)
    write(api, key, 0)
    original = search_all(api, key)
    set_policy(api, key, group, 3, archive=True)
    code, report = retention(settings, key)
    assert code == 0, report
    dropped = [d for d in report["drops"] if d["outcome"] == "dropped"]
    assert dropped and all(d["archive"] for d in dropped)
    assert sum(d["rows"] for d in dropped) == 120
    for drop in dropped:
        manifest = json.loads(
            Path(drop["archive"].replace(".copy.gz", ".manifest.json")).read_text()
        )
        assert manifest["owner"] == key and manifest["day"] == drop["day"]
        # The inserting transaction stays behind: a restored row is a new one on its shard.
        assert "created_xid" not in manifest["columns"] and "id" in manifest["columns"]
    assert len(search_all(api, key)) == 40

    day = (TODAY - timedelta(days=6)).isoformat()
    restored = run_cli(settings, "restore", key, day, "--json")
    assert restored.returncode == 0, restored.stderr
    assert json.loads(restored.stdout)["rows"] == 120
    assert search_all(api, key) == original
    # The restored day is on hold: the next run keeps it.
    assert retention(settings, key)[1]["drops"] == []
    assert days_held(api, key)[6] == 120
    # Restoring again would duplicate: refused, nothing loaded.
    again = run_cli(settings, "restore", key, day)
    assert again.returncode == 2 and "already holds rows" in again.stderr
    assert days_held(api, key)[6] == 120


def test_restore_of_a_day_never_archived_is_a_clear_error(api, settings) -> None:
    key, _ = new_owner(api)
    result = run_cli(settings, "restore", key, "2020-01-01")
    assert result.returncode == 2 and "no archive" in result.stderr


def test_erase_leaves_nothing_of_the_owner_anywhere(api, settings) -> None:
    key, group = new_owner(api, archive=True)
    for ago in (0, 2, 9):
        write(api, key, ago)
    set_policy(api, key, group, 5, archive=True)
    assert retention(settings, key)[0] == 0  # day 9 archived and dropped
    ident = owner_id(api, "audit", key)
    archive_dir = Path(settings.retention.archive_dir) / "audit" / str(ident)
    assert any(archive_dir.iterdir())

    partial = run_cli(
        settings,
        "owner",
        "erase",
        key,
        "--before",
        (TODAY - timedelta(days=1)).isoformat(),
        "--json",
    )
    assert partial.returncode == 0, partial.stderr
    assert days_held(api, key) == {0: 40}

    result = run_cli(settings, "owner", "erase", key, "--forget", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["complete"] and report["forgotten"]
    assert day_tables(api, "audit", ident) == {}
    assert not archive_dir.exists() or not any(archive_dir.iterdir())
    assert api.get("/v1/admin/owners", params={"kind": "audit", "key": key}).status_code == 404
    assert all(p["owner"] != key for p in api.get("/v1/admin/retention/policies").json())
    metadata = settings.metadata_dsn()
    assert (
        shard_sql(
            metadata, f"SELECT count(*) FROM day_tables WHERE owner_id = {ident} AND kind = 'audit'"
        ).strip()
        == "0"
    )


def test_owner_export_as_ndjson_and_csv(api, settings, tmp_path) -> None:
    key, _ = new_owner(api)
    write(api, key, 3, rows=30, content=HOSTILE)
    write(api, key, 0, rows=20)
    since = (TODAY - timedelta(days=5)).isoformat()
    ndjson = run_cli(settings, "owner", "export", key, "--from", since, "--to", TODAY.isoformat())
    assert ndjson.returncode == 0, ndjson.stderr
    rows = [json.loads(line) for line in ndjson.stdout.splitlines()]
    assert rows == search_all(api, key)
    assert len(rows) == 50 and rows[0]["content"] == f"{HOSTILE} 0"
    target = tmp_path / "owner.csv"
    result = run_cli(
        settings,
        "owner",
        "export",
        key,
        "--from",
        since,
        "--to",
        TODAY.isoformat(),
        "--format",
        "csv",
        "--output",
        str(target),
    )
    assert result.returncode == 0, result.stderr
    import csv

    with target.open(newline="") as data:
        table = list(csv.DictReader(data))
    assert [r["content"] for r in table] == [r["content"] for r in rows]
    assert json.loads(table[0]["attrs"]) == rows[0]["attrs"]


def test_concurrent_runs_drop_each_table_once(api, settings) -> None:
    key, group = new_owner(api)
    for ago in (0, 1, 2, 3, 11, 12, 13):
        write(api, key, ago)
    set_policy(api, key, group, 10)
    from tests.support import REPO, cli_env

    runs = [
        subprocess.Popen(
            [
                __import__("sys").executable,
                "-m",
                "router.cli",
                "retention",
                "run",
                "--owner",
                key,
                "--json",
            ],
            env=cli_env(settings),
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    reports = []
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        reports.append(json.loads(out))
    dropped = [
        (d["table"], d["shard"]) for r in reports for d in r["drops"] if d["outcome"] == "dropped"
    ]
    assert len(dropped) == len(set(dropped)) >= 3
    assert set(days_held(api, key)) == {0, 1, 2, 3}


def test_drop_while_searching_and_ingesting_loses_nothing_kept(api, settings) -> None:
    key, group = new_owner(api)
    for ago in (1, 2, 9, 10):
        write(api, key, ago, rows=200)
    set_policy(api, key, group, 5)
    statuses: list[int] = []
    stop = threading.Event()
    written = {"rows": 0}

    def searcher() -> None:
        while not stop.is_set():
            response = api.get(
                "/v1/audit/search",
                params={
                    "owner": key,
                    "from": midnight(12).isoformat(),
                    "to": midnight(-1).isoformat(),
                    "limit": 1000,
                    "count": "exact",
                },
            )
            statuses.append(response.status_code)

    def writer() -> None:
        n = 0
        while not stop.is_set():
            write(api, key, 1, rows=50, content=f"late {n}")
            written["rows"] += 50
            n += 1

    threads = [threading.Thread(target=searcher), threading.Thread(target=writer)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(0.3)
        code, report = retention(settings, key)
        time.sleep(0.3)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert code == 0, report
    assert statuses and all(s == 200 for s in statuses), sorted(set(statuses))
    assert days_held(api, key) == {1: 200 + written["rows"], 2: 200}


def test_table_catalog_and_policy_admin_errors(api, settings) -> None:
    key, group = new_owner(api)
    write(api, key, 0, rows=25)
    listing = api.get("/v1/admin/tables", params={"owner": key, "exact": "true"}).json()
    assert sum(t["rows"] for t in listing["tables"]) == 25
    assert all(t["owner"] == key and t["bytes"] > 0 and t["registered"] for t in listing["tables"])
    cli = run_cli(settings, "tables", "list", "--owner", key, "--exact", "--json")
    assert json.loads(cli.stdout)["tables"] == listing["tables"]

    bad_group = api.put(
        "/v1/admin/retention/policies",
        json={"kind": "audit", "group": "no-such-group", "keep_days": 3},
    )
    assert bad_group.status_code == 404 and bad_group.json()["error"]["field"] == "group"
    zero = api.put(
        "/v1/admin/retention/policies", json={"kind": "audit", "group": group, "keep_days": 0}
    )
    assert zero.status_code == 422 and zero.json()["error"]["field"] == "keep_days"
    missing = api.get("/v1/admin/retention/runs/987654321")
    assert missing.status_code == 404 and missing.json()["error"]["field"] == "run_id"
    gone = api.delete("/v1/admin/retention/policies/987654321")
    assert gone.status_code == 404


@pytest.mark.parametrize("flag", ["--as-of", "--before"])
def test_cli_rejects_a_bad_day(settings, flag) -> None:
    args = (
        ["retention", "run", flag, "yesterday"]
        if flag == "--as-of"
        else ["owner", "erase", "someone", flag, "yesterday"]
    )
    result = run_cli(settings, *args)
    assert result.returncode == 2 and "not a day" in result.stderr


def test_two_routers_run_the_job_and_drop_each_table_once(api, settings, tmp_path) -> None:
    from services.process import free_port
    from services.router_process import RouterProcess
    from tests.support import settings_env

    key, group = new_owner(api)
    for ago in (0, 1, 2, 3, 14, 15):
        write(api, key, ago)
    ident = owner_id(api, "audit", key)
    expired = {
        (shard, table)
        for shard, tables in day_tables(api, "audit", ident).items()
        for table in tables
        if table.endswith(tuple((TODAY - timedelta(days=d)).strftime("%Y%m%d") for d in (14, 15)))
    }
    routers = [
        RouterProcess(
            tmp_path / f"router{n}",
            "127.0.0.1",
            free_port(),
            env={
                **settings_env(settings),
                "SHARDLOG_RETENTION__ENABLED": "true",
                "SHARDLOG_RETENTION__INTERVAL_S": "0.3",
            },
        )
        for n in range(2)
    ]
    for router in routers:
        router.start()
    try:
        set_policy(api, key, group, 10)
        eventually(lambda: set(days_held(api, key)) == {0, 1, 2, 3}, timeout=30)
        time.sleep(1)  # a few more runs of both routers
        metrics = [__import__("httpx").get(f"{r.url}/metrics").text for r in routers]
    finally:
        for router in routers:
            router.stop()
    runs = api.get("/v1/admin/retention/runs", params={"limit": 200}).json()
    dropped = []
    for run in runs:
        if run["trigger"] != "router" or run["tables_dropped"] == 0:
            continue
        detail = api.get(f"/v1/admin/retention/runs/{run['id']}").json()
        dropped += [
            (d["shard"], d["table_name"])
            for d in detail["drops"]
            if d["outcome"] == "dropped" and d["owner_id"] == ident
        ]
    assert sorted(dropped) == sorted(expired)
    # The runs that dropped something are in the platform's own audit.
    now = clock.now()
    audited = api.get(
        "/v1/audit/search",
        params={
            "owner": "shardlog.admin",
            "from": (now - timedelta(hours=1)).isoformat(),
            "to": (now + timedelta(hours=1)).isoformat(),
            "q": "retention.run",
            "limit": 1000,
        },
    ).json()["items"]
    by_job = [r for r in audited if r["attrs"]["actor"].startswith("retention job")]
    assert sum(r["attrs"]["tables_dropped"] for r in by_job) >= len(expired)
    assert any("shardlog_retention_tables_dropped_total" in text for text in metrics)
    assert all('shardlog_retention_runs_total{status="done"}' in text for text in metrics)
    for router in routers:
        assert "SHARDLOG-BUG" not in router.log_file.read_text()
