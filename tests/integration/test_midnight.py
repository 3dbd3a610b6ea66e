"""The proof that "now" is one clock: a router, a syslog listener, a NetFlow/IPFIX collector
and the retention CLI of their own, every one with its clock set a few seconds before midnight
of a month's last day (SHARDLOG_CLOCK__OFFSET_S) and left running across it. Writes, search, a
live tail, a retention dry run and a foreign tenant's access are checked on both sides of the
boundary.

One running offset rather than a frozen clock per phase: the tail opened before midnight must
receive what is written after it on the same router process, so the processes' clocks have to
move on their own. The offset puts midnight a fixed budget after the processes start: the
phase before it must end within the budget (it is checked), then the test polls (no sleep)
until the shifted clock has crossed."""

from __future__ import annotations

import itertools
import random
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from bench.collector import packets
from router import clock
from router.auth.scopes import DATA_SCOPES
from router.clock import Clock
from router.settings import Settings
from services.cluster import LocalCluster
from tests.support import (
    TestedHelper as HelperProcess,
)
from tests.support import (
    another_router,
    await_token,
    bearer,
    clock_env,
    free_port_range,
    issue_token,
    map_audit_owner,
    run_cli,
    running_router,
    settings_env,
)
from tests.syslog.platform import RunningSyslog
from tests.tail_client import TailClient

MIDNIGHT = datetime(2026, 11, 1, tzinfo=UTC)
LAST_DAY, FIRST_DAY = date(2026, 10, 31), date(2026, 11, 1)
# From the processes' start to midnight: room for starting them and the phase before midnight.
BUDGET_S = 15.0
ROWS = 3
BEFORE = {f"before {i}" for i in range(ROWS)}
AFTER = {f"after {i}" for i in range(ROWS)}


class Shifted:
    """The test's side of the clock every process of the module runs."""

    def __init__(self) -> None:
        self.env = clock_env(MIDNIGHT - timedelta(seconds=BUDGET_S))
        self.clock = Clock(offset_s=float(self.env["SHARDLOG_CLOCK__OFFSET_S"]))

    def before_midnight(self, what: str) -> None:
        left = (MIDNIGHT - self.clock.now()).total_seconds()
        assert left > 0.5, f"{what} ended {-left:.1f} s after midnight (budget {BUDGET_S} s)"

    def wait_past_midnight(self, margin_s: float = 0.2) -> None:
        """Poll until every process's clock reads past midnight."""
        deadline = time.monotonic() + BUDGET_S + 5
        while self.clock.now() < MIDNIGHT + timedelta(seconds=margin_s):
            assert time.monotonic() < deadline, "the shifted clock did not reach midnight"
            time.sleep(0.05)


@pytest.fixture(scope="module")
def shifted() -> Shifted:
    return Shifted()


@pytest.fixture(scope="module")
def midnight_router(
    settings: Settings, cluster: LocalCluster, shifted: Shifted, tmp_path_factory: Any
) -> Iterator[httpx.Client]:
    home: Path = tmp_path_factory.mktemp("midnight-router")
    with (
        running_router(another_router(settings, home, shifted.env)) as router,
        httpx.Client(base_url=router.url, timeout=30) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def midnight_syslog(
    settings: Settings, cluster: LocalCluster, shifted: Shifted, tmp_path_factory: Any
) -> Iterator[RunningSyslog]:
    mapped = run_cli(settings, "syslog-senders", "set", "127.0.0.1", "--tenant", "system")
    assert mapped.returncode == 0, mapped.stderr
    ports = itertools.count(free_port_range(4))
    home: Path = tmp_path_factory.mktemp("midnight-syslog")
    with RunningSyslog(home, settings, ports, extra=shifted.env).running() as listener:
        yield listener


@dataclass(frozen=True)
class Exporter:
    """The collector of the module, and the switch its exporter 127.0.0.1 writes as (through
    one observation domain of its own)."""

    process: HelperProcess
    port: int
    switch: str
    domain: int


@pytest.fixture(scope="module")
def midnight_collector(
    settings: Settings, cluster: LocalCluster, shifted: Shifted, tmp_path_factory: Any
) -> Iterator[Exporter]:
    switch = f"midnight-nf-{uuid.uuid4().hex[:10]}"
    domain = random.randrange(1 << 20, 1 << 31)
    mapped = run_cli(settings, "exporters", "set", "127.0.0.1", switch, "--domain", str(domain))
    assert mapped.returncode == 0, mapped.stderr
    home: Path = tmp_path_factory.mktemp("midnight-collector")
    port = free_port_range(3)
    env = {
        **settings_env(settings),
        "SHARDLOG_COLLECTOR__NETFLOW_PORT": str(port),
        "SHARDLOG_COLLECTOR__IPFIX_PORT": str(port + 1),
        "SHARDLOG_COLLECTOR__METRICS_PORT": str(port + 2),
        "SHARDLOG_COLLECTOR__STATE_FILE": str(home / "templates.json"),
        "SHARDLOG_COLLECTOR__FLUSH_INTERVAL_S": "0.2",
        **shifted.env,
    }
    process = HelperProcess(home, "127.0.0.1", port + 2, env)
    process.start()
    try:
        yield Exporter(process, port, switch, domain)
    finally:
        process.stop()
        process.check_log()
        run_cli(settings, "exporters", "remove", "127.0.0.1", "--domain", str(domain))


def exported(exporter: Exporter, network: int, first: datetime, sent: datetime) -> None:
    """An IPFIX message (its template too) of ``ROWS`` flows starting at ``first``, sent at
    ``sent`` as its exporter's clock says."""
    first_ms = int(first.timestamp() * 1000)
    template = packets.flow_template(901)
    records = [
        packets.flow_record(
            bytes([198, 18, network, n]), bytes([203, 0, 113, 1]), 2000 + n, 443, 700,
            first_ms, first_ms + 10,
        )
        for n in range(1, ROWS + 1)
    ]  # fmt: skip
    sets = [packets.ipfix_template_set([template]), packets.data_set(template, records)]
    message = packets.ipfix_message(sets, int(sent.timestamp()), domain=exporter.domain)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(message, ("127.0.0.1", exporter.port))


def audit(client: httpx.Client, token: str, owner: str, tag: str) -> None:
    """``ROWS`` rows without ts: they take the router's now."""
    body = b"".join(
        orjson.dumps({"owner": owner, "content": f"{tag} {i}"}) + b"\n" for i in range(ROWS)
    )
    response = client.post(
        "/v1/audit",
        content=body,
        headers={**bearer(token), "content-type": "application/x-ndjson"},
    )
    assert response.status_code == 200, response.text


def flows(client: httpx.Client, token: str, switch: str, first: int) -> None:
    records = [
        {
            "switch": switch,
            "src_ip": f"10.9.0.{n}",
            "dst_ip": "192.0.2.1",
            "src_port": 1000 + n,
            "dst_port": 443,
            "proto": 6,
            "bytes": 100,
            "packets": 1,
        }
        for n in range(first, first + ROWS)
    ]
    response = client.post("/v1/flows", json=records, headers=bearer(token))
    assert response.status_code == 200, response.text


def syslog(listener: RunningSyslog, owner: str, tag: str) -> None:
    """One message without a timestamp: it takes the listener's now."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        message = f'<13>1 - - - - - [shardlog@32473 owner="{owner}"] {tag}'
        sock.sendto(message.encode(), ("127.0.0.1", listener.port))


def tables(client: httpx.Client, token: str, kind: str, owner: str) -> dict[date, int]:
    """The owner's day tables as the catalog records them, with their exact rows."""
    response = client.get(
        "/v1/admin/tables",
        params={"owner": owner, "kind": kind, "exact": "true"},
        headers=bearer(token),
    )
    assert response.status_code == 200, response.text
    held: dict[date, int] = {}
    for table in response.json()["tables"]:
        day = date.fromisoformat(table["day"])
        held[day] = held.get(day, 0) + table["rows"]
    return held


def search(client: httpx.Client, token: str, owner: str, limit: int) -> list[dict[str, Any]]:
    """Every row of the hour around midnight, ``limit`` a page, following the cursors."""
    items: list[dict[str, Any]] = []
    params: dict[str, Any] = {
        "owner": owner,
        "from": (MIDNIGHT - timedelta(hours=1)).isoformat(),
        "to": (MIDNIGHT + timedelta(hours=1)).isoformat(),
        "limit": limit,
        "order": "asc",
    }
    while True:
        response = client.get("/v1/audit/search", params=params, headers=bearer(token))
        assert response.status_code == 200, response.text
        page = response.json()
        items += page["items"]
        if page["next_cursor"] is None:
            return items
        params["cursor"] = page["next_cursor"]


def dry_run(settings: Settings, shifted: Shifted, owner: str) -> dict[str, Any]:
    result = run_cli(
        settings, "retention", "run", "--owner", owner, "--dry-run", "--json", env=shifted.env
    )
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = orjson.loads(result.stdout)
    return report


def test_write_search_tail_retention_and_access_across_a_month_end(
    settings: Settings,
    api: httpx.Client,
    api_token: str,
    shifted: Shifted,
    midnight_router: httpx.Client,
    midnight_syslog: RunningSyslog,
    midnight_collector: Exporter,
) -> None:
    router = midnight_router
    owner, group = map_audit_owner(api, "midnight")
    switch = f"midnight-sw-{uuid.uuid4().hex[:10]}"
    foreign = await_token(
        str(router.base_url),
        issue_token(settings, f"midnight-{uuid.uuid4().hex[:8]}", DATA_SCOPES, name="foreign"),
    )
    token = await_token(str(router.base_url), api_token)

    # --- before midnight (23:59:xx on the 31st, as every process reads it) ------------------
    shifted.before_midnight("starting the processes")
    # A row of the day before, then a policy keeping one day: kept until the clock's today
    # moves on.
    old = {"owner": owner, "ts": "2026-10-30T12:00:00Z", "content": "the day before"}
    assert router.post("/v1/audit", json=[old], headers=bearer(token)).is_success
    response = router.put(
        "/v1/admin/retention/policies",
        json={"kind": "audit", "group": group, "owner": owner, "keep_days": 1},
        headers=bearer(token),
    )
    assert response.status_code == 200, response.text
    tail = TailClient(str(router.base_url), "/v1/audit/tail", {"owner": owner}, token)
    with tail.start().subscribed():
        audit(router, token, owner, "before")
        flows(router, token, switch, 0)
        syslog(midnight_syslog, owner, "syslog before")
        exported(midnight_collector, 1, shifted.clock.now(), shifted.clock.now())
        # An hour ahead of the collector's clock (past the write API's future skew): dropped.
        exported(midnight_collector, 2, MIDNIGHT + timedelta(hours=1), shifted.clock.now())
        report = dry_run(settings, shifted, owner)
        assert report["as_of"] == LAST_DAY.isoformat() and report["drops"] == [], report
        tail.wait(lambda c: {r["content"] for r in c.rows()} >= BEFORE)
        shifted.before_midnight("the phase before midnight")

        # --- after midnight (the 1st) --------------------------------------------------------
        shifted.wait_past_midnight()
        audit(router, token, owner, "after")
        flows(router, token, switch, ROWS)
        syslog(midnight_syslog, owner, "syslog after")
        exported(midnight_collector, 3, shifted.clock.now(), shifted.clock.now())
        tail.wait(lambda c: {r["content"] for r in c.rows()} >= AFTER)

    rows = tail.rows()
    befores = [r for r in rows if r["content"] in BEFORE]
    afters = [r for r in rows if r["content"] in AFTER]
    assert sorted(r["content"] for r in befores) == sorted(BEFORE)
    assert sorted(r["content"] for r in afters) == sorted(AFTER)
    assert rows.index(befores[-1]) < rows.index(afters[0])
    assert all(r["ts"].startswith("2026-10-31T23:59:") for r in befores), befores
    assert all(r["ts"].startswith("2026-11-01T00:00:") for r in afters), afters

    # The days rows without ts landed on: the clock's, each side of midnight.
    per_day = ROWS + 1  # the audit rows and one syslog message each side
    expected = {date(2026, 10, 30): 1, LAST_DAY: per_day, FIRST_DAY: per_day}
    # The listener's batches reach the database a moment after it read the messages.
    deadline = time.monotonic() + 20
    while (held := tables(router, token, "audit", owner)) != expected:
        assert time.monotonic() < deadline, held
        time.sleep(0.1)
    assert tables(router, token, "flow", switch) == {LAST_DAY: ROWS, FIRST_DAY: ROWS}
    # The collector's flows: on their own days, those ahead of its clock dropped and counted.
    collected = {LAST_DAY: ROWS, FIRST_DAY: ROWS}
    while (held := tables(router, token, "flow", midnight_collector.switch)) != collected:
        assert time.monotonic() < deadline, held
        time.sleep(0.1)
    labels = {"exporter": "127.0.0.1", "reason": "in the future"}
    assert (
        midnight_collector.process.metric("shardlog_collector_dropped_flows_total", **labels)
        == ROWS
    )

    # One search across the boundary, by pages of two: the cursors cross midnight.
    whole = search(router, token, owner, limit=1000)
    assert sorted(r["content"] for r in whole) == sorted(
        [*BEFORE, *AFTER, "syslog before", "syslog after"]
    )
    assert [r["ts"] for r in whole] == sorted(r["ts"] for r in whole)
    days = [r["ts"][:10] for r in whole]
    assert days == ["2026-10-31"] * per_day + ["2026-11-01"] * per_day, days
    assert search(router, token, owner, limit=2) == whole
    # The session router (the wall clock) finds the same rows with the explicit window.
    assert search(api, api_token, owner, limit=1000) == whole

    # Retention's today moved with the clock: the day before is now past its one day.
    report = dry_run(settings, shifted, owner)
    assert report["as_of"] == FIRST_DAY.isoformat(), report
    assert [(d["day"], d["outcome"]) for d in report["drops"]] == [("2026-10-30", "would_drop")]

    # A token of another tenant gets nothing, on either side of midnight.
    refused = router.get(
        "/v1/audit/search",
        params={
            "owner": owner,
            "from": (MIDNIGHT - timedelta(hours=1)).isoformat(),
            "to": (MIDNIGHT + timedelta(hours=1)).isoformat(),
        },
        headers=bearer(foreign),
    )
    assert refused.status_code == 403 and "items" not in refused.json(), refused.text
    with TailClient(str(router.base_url), "/v1/audit/tail", {"owner": owner}, foreign) as stranger:
        stranger.wait(lambda c: c.status is not None)
        assert stranger.status == 403 and stranger.rows() == []
    answer = router.post(
        "/v1/audit",
        json=[{"owner": owner, "content": "intruder"}],
        headers=bearer(foreign),
    )
    assert answer.status_code == 403, answer.text
    assert tables(router, token, "audit", owner) == expected


def drift_of(metrics: str) -> float:
    """``shardlog_clock_drift_seconds`` of a /metrics text."""
    lines = [line for line in metrics.splitlines() if line.startswith("shardlog_clock_drift_")]
    assert len(lines) == 1, lines
    return float(lines[0].rsplit(" ", 1)[1])


def test_every_process_reports_the_clock_it_was_given(
    api: httpx.Client, shifted: Shifted, midnight_router: httpx.Client, api_token: str
) -> None:
    """The session router reads the session's clock (the wall clock, or the one
    SHARDLOG_CLOCK__OFFSET_S gave pytest and its launchers); this module's processes theirs."""
    session = api.get("/metrics")
    assert session.status_code == 200, session.text
    assert drift_of(session.text) == pytest.approx(clock.current().drift_s(), abs=1e-3)
    ours = midnight_router.get("/metrics", headers=bearer(api_token))
    assert ours.status_code == 200, ours.text
    assert drift_of(ours.text) == pytest.approx(shifted.clock.offset_s, abs=1e-3)
    assert shifted.clock.offset_s != 0
