"""Live tail against real shards and real HTTP streams: every row committed after the
subscription reaches it exactly once, in order, across resumes, replays, routers and a shard
restart; filters as a search's; a client that stops reading is cut off, not buffered."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import httpx
import orjson
import pytest

from router import clock
from router.auth.scopes import DATA_SCOPES, SCOPES, SYSTEM_TENANT
from router.settings import Settings
from services.cluster import LocalCluster
from services.router_process import RouterProcess
from tests.support import (
    another_router,
    bearer,
    eventually,
    issue_token,
    run_cli,
    running_router,
)
from tests.tail_client import TailClient, settled


def _owner(stem: str = "tail") -> str:
    return f"{stem}-{uuid.uuid4().hex[:10]}"


def _post_audit(client: httpx.Client, records: list[dict[str, Any]]) -> None:
    body = b"".join(orjson.dumps(r) + b"\n" for r in records)
    response = client.post(
        "/v1/audit", content=body, headers={"content-type": "application/x-ndjson"}
    )
    assert response.status_code == 200, response.text


def _post_flows(client: httpx.Client, records: list[dict[str, Any]]) -> None:
    body = b"".join(orjson.dumps(r) + b"\n" for r in records)
    response = client.post(
        "/v1/flows", content=body, headers={"content-type": "application/x-ndjson"}
    )
    assert response.status_code == 200, response.text


def _audit(owner: str, count: int, tag: str, ts: datetime | None = None) -> list[dict[str, Any]]:
    at = ts or clock.now()
    return [
        {
            "owner": owner,
            "ts": (at + timedelta(microseconds=n)).isoformat(),
            "content": f"{tag} {n}",
        }
        for n in range(count)
    ]


def _settled(
    tail: TailClient, client: httpx.Client, owner: str, tag: str = "sentinel"
) -> list[dict[str, Any]]:
    """The stream's rows but the sentinel (``tag 0``, an audit row of ``owner`` written once
    the expected rows came): what a late duplicate would be among (tests/tail_client.py)."""
    return settled(
        tail,
        lambda: _post_audit(client, _audit(owner, 1, tag)),
        lambda row: row["content"] == f"{tag} 0",
    )


def _contents(rows: list[dict[str, Any]]) -> list[str]:
    return [r["content"] for r in rows]


def _in_order(rows: list[dict[str, Any]]) -> bool:
    keys = [(r["ts"], r["shard"]) for r in rows if not r["late"]]
    return keys == sorted(keys)


@pytest.fixture(scope="module")
def second_router(
    settings: Settings, cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RouterProcess]:
    """Another router on the same catalog and shards, with a short watermark."""
    env = {
        "SHARDLOG_TAIL__WATERMARK_S": "0.3",
        "SHARDLOG_TAIL__MAX_BUFFERED_EVENTS": "200",
        "SHARDLOG_TAIL__MAX_SUBSCRIPTIONS": "3",
    }
    with running_router(another_router(settings, tmp_path_factory.mktemp("tail-b"), env)) as router:
        yield router


def _tail(
    router: RouterProcess, token: str, params: Any, kind: str = "audit", **options: Any
) -> TailClient:
    return TailClient(router.url, f"/v1/{kind}/tail", params, token, **options).start().subscribed()


def test_rows_arrive_once_and_in_order(
    router_process: RouterProcess, api: httpx.Client, api_token: str
) -> None:
    owner = _owner()
    with _tail(router_process, api_token, {"owner": owner}) as tail:
        assert tail.status == 200
        for batch in range(5):
            _post_audit(api, _audit(owner, 40, f"b{batch}"))
        tail.wait(lambda c: len(c.rows()) >= 200)
        rows = _settled(tail, api, owner)
    assert sorted(_contents(rows)) == sorted(f"b{b} {n}" for b in range(5) for n in range(40))
    assert _in_order(rows)
    assert all(r["owner"] == owner and r["ref"] for r in rows)
    assert all(e.id for e in tail.events if e.event == "message")


def test_filters_apply_as_in_a_search(
    router_process: RouterProcess, api: httpx.Client, api_token: str
) -> None:
    owner, other = _owner(), _owner()
    with _tail(router_process, api_token, {"owner": owner, "q": ["denied", "ssh"]}) as tail:
        _post_audit(
            api,
            [
                {"owner": owner, "content": "ssh login denied for root"},
                {"owner": owner, "content": "ssh login accepted"},
                {"owner": owner, "content": "denied: ssh key"},
                {"owner": other, "content": "ssh denied elsewhere"},
            ],
        )
        tail.wait(lambda c: len(c.rows()) >= 2)
        _post_audit(api, [{"owner": owner, "content": "end ssh denied"}])
        tail.wait(lambda c: len(c.rows()) >= 3)
        rows = _settled(tail, api, owner, "sentinel ssh denied")
    assert sorted(_contents(rows)) == [
        "denied: ssh key",
        "end ssh denied",
        "ssh login denied for root",
    ]


def test_flows_with_filters_and_merges(
    router_process: RouterProcess, api: httpx.Client, api_token: str
) -> None:
    switch = _owner("sw")
    now = clock.now()

    def flow(src: str, port: int, size: int, **extra: Any) -> dict[str, Any]:
        return {
            **extra,
            "switch": switch,
            "ts": now.isoformat(),
            "src_ip": src,
            "dst_ip": "10.9.9.9",
            "src_port": port,
            "dst_port": 443,
            "proto": 6,
            "bytes": size,
            "packets": 1,
        }

    params = {"switch": switch, "src_ip": "10.1.0.0/16"}
    with _tail(router_process, api_token, params, kind="flows") as tail:
        _post_flows(api, [flow("10.1.2.3", 1000, 100), flow("192.0.2.1", 1001, 100)])
        tail.wait(lambda c: len(c.rows()) >= 1)
        _post_flows(api, [flow("10.1.2.3", 1000, 50, tcp_flags=0x12, sampling_rate=8)])
        tail.wait(lambda c: len(c.rows()) >= 2)
        first, merge = settled(
            tail,
            lambda: _post_flows(api, [flow("10.1.9.9", 1009, 1)]),
            lambda row: row["src_ip"] == "10.1.9.9",
        )
    assert (first["src_ip"], first["bytes"], first["merged"]) == ("10.1.2.3", 100, False)
    assert (merge["src_ip"], merge["bytes"], merge["merged"]) == ("10.1.2.3", 150, True)
    # What exporters add, as a search shows it: nothing said, then flags and a rate merged in.
    added = ("tcp_flags", "sampling_rate", "sampled", "sampling_mixed")
    assert [tuple(row[name] for name in added) for row in (first, merge)] == [
        (None, None, False, False),
        (0x12, 8, True, True),
    ]
    assert first["ref"] == merge["ref"]


def test_resume_after_a_dropped_connection_has_no_gap_and_no_repeat(
    router_process: RouterProcess, api: httpx.Client, api_token: str
) -> None:
    owner = _owner()
    tail = _tail(router_process, api_token, {"owner": owner})
    _post_audit(api, _audit(owner, 30, "before"))
    tail.wait(lambda c: len(c.rows()) >= 10)
    tail.drop()
    kept = tail.rows()
    last_id = tail.parser.last_id
    assert last_id is not None
    _post_audit(api, _audit(owner, 30, "between"))
    with TailClient(
        router_process.url, "/v1/audit/tail", {"owner": owner}, api_token, last_id
    ).start() as again:
        again.subscribed()
        _post_audit(api, _audit(owner, 30, "after"))
        again.wait(lambda c: len(kept) + len(c.rows()) >= 90)
        got = kept + _settled(again, api, owner)
    expected = [f"{tag} {n}" for tag in ("before", "between", "after") for n in range(30)]
    assert sorted(_contents(got)) == sorted(expected)


def test_replay_then_live_seam(
    router_process: RouterProcess, api: httpx.Client, api_token: str
) -> None:
    owner = _owner()
    start = clock.now() - timedelta(minutes=10)
    _post_audit(api, _audit(owner, 5, "too old", start - timedelta(minutes=1)))
    _post_audit(api, _audit(owner, 50, "old", start + timedelta(minutes=1)))
    stop = threading.Event()

    def keep_writing() -> None:
        n = 0
        while not stop.is_set() and n < 20:
            _post_audit(api, _audit(owner, 5, f"live{n}"))
            n += 1

    writer = threading.Thread(target=keep_writing)
    params = {"owner": owner, "from": start.isoformat()}
    with TailClient(router_process.url, "/v1/audit/tail", params, api_token) as tail:
        writer.start()
        writer.join()
        tail.wait(lambda c: len(c.rows()) >= 150)
        rows = _settled(tail, api, owner)
    got = _contents(rows)
    assert sorted(got) == sorted(
        [f"old {n}" for n in range(50)] + [f"live{i} {n}" for i in range(20) for n in range(5)]
    )
    replayed = [r for r in rows if r.get("replayed")]
    assert [r["content"] for r in replayed[:50]] == [f"old {n}" for n in range(50)]


def test_a_row_written_through_one_router_reaches_another(
    router_process: RouterProcess,
    second_router: RouterProcess,
    api: httpx.Client,
    api_token: str,
) -> None:
    owner = _owner()
    with (
        httpx.Client(base_url=second_router.url, headers=bearer(api_token), timeout=30) as b,
        _tail(second_router, api_token, {"owner": owner}) as tail,
    ):
        writers = [
            threading.Thread(target=_post_audit, args=(client, _audit(owner, 50, tag)))
            for client, tag in ((api, "a1"), (b, "b1"), (api, "a2"), (b, "b2"))
        ]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join()
        tail.wait(lambda c: len(c.rows()) >= 200)
        rows = _settled(tail, b, owner)
    expected = [f"{t} {n}" for t in ("a1", "b1", "a2", "b2") for n in range(50)]
    assert sorted(_contents(rows)) == sorted(expected)


def test_a_client_that_stops_reading_gets_an_overflow_and_resumes(
    second_router: RouterProcess, api: httpx.Client, api_token: str
) -> None:
    owner = _owner()
    stuck = TailClient(
        second_router.url, "/v1/audit/tail", {"owner": owner}, api_token, receive_buffer=4096
    ).start()
    # Rows count from the `subscribed` event (the shards' first reads): read up to it, then
    # stop reading.
    stuck.subscribed()
    stuck.pause_reading()
    for batch in range(20):
        _post_audit(api, _audit(owner, 50, f"x{batch}", ts=clock.now()))
    eventually(lambda: _metric(second_router, "shardlog_tail_overflows_total") >= 1, 20)
    stuck.resume_reading()
    stuck.wait(lambda c: bool(c.of("overflow")) and c.closed.is_set())
    kept = stuck.rows()
    cursor = stuck.of("overflow")[0].id
    with TailClient(
        second_router.url, "/v1/audit/tail", {"owner": owner, "after": cursor}, api_token
    ).start() as again:
        again.subscribed()
        again.wait(lambda c: len(kept) + len(c.rows()) >= 1000)
        got = _contents(kept + _settled(again, api, owner))
    assert sorted(got) == sorted(f"x{b} {n}" for b in range(20) for n in range(50))


def test_subscriptions_past_the_cap_get_429(second_router: RouterProcess, api_token: str) -> None:
    open_ones = [_tail(second_router, api_token, {"owner": _owner()}) for _ in range(3)]
    try:
        refused = TailClient(second_router.url, "/v1/audit/tail", {}, api_token).start()
        refused.wait(lambda c: c.status is not None)
        assert refused.status == 429
    finally:
        for client in open_ones:
            client.drop()


def test_a_shard_restart_loses_no_row(
    router_process: RouterProcess, api: httpx.Client, api_token: str, cluster: LocalCluster
) -> None:
    owner = _owner()
    with _tail(router_process, api_token, {"owner": owner}) as tail:
        _post_audit(api, _audit(owner, 20, "first"))
        tail.wait(lambda c: len(c.rows()) >= 20)
        shard = cluster.shards[0]
        shard.stop()
        shard.start()
        for batch in range(5):
            records = _audit(owner, 20, f"after{batch}")
            eventually(lambda records=records: _try_post(api, records), 30)
        tail.wait(lambda c: len(c.rows()) >= 120, 40)
        got = _contents(_settled(tail, api, owner))
    assert sorted(got) == sorted(
        [f"first {n}" for n in range(20)] + [f"after{b} {n}" for b in range(5) for n in range(20)]
    )


def test_access_needs_tail_and_read_scopes_of_the_tenant(
    router_process: RouterProcess, settings: Settings, api: httpx.Client
) -> None:
    owner = _owner()
    _post_audit(api, _audit(owner, 1, "mine"))
    foreign = issue_token(settings, f"other-{uuid.uuid4().hex[:6]}", DATA_SCOPES)
    no_tail = issue_token(settings, SYSTEM_TENANT, [s for s in SCOPES if s != "tail"])
    for token in (foreign, no_tail):
        # A token made straight in the catalog reaches the router by its NOTIFY: 401 until then.
        eventually(lambda token=token: _status(router_process, owner, token) != 401 or None)
        assert _status(router_process, owner, token) == 403


def _status(router: RouterProcess, owner: str, token: str) -> int | None:
    client = TailClient(router.url, "/v1/audit/tail", {"owner": owner}, token).start()
    client.wait(lambda c: c.status is not None and c.closed.is_set())
    return client.status


def _try_post(client: httpx.Client, records: list[dict[str, Any]]) -> bool | None:
    body = b"".join(orjson.dumps(r) + b"\n" for r in records)
    response = client.post(
        "/v1/audit", content=body, headers={"content-type": "application/x-ndjson"}
    )
    return True if response.status_code == 200 else None


def _metric(router: RouterProcess, name: str) -> float:
    text = httpx.get(f"{router.url}/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _subscribers(router: RouterProcess) -> float:
    return _metric(router, "shardlog_tail_subscribers")


def test_the_cli_replays_follows_and_resumes(
    router_process: RouterProcess, settings: Settings, api: httpx.Client, api_token: str
) -> None:
    """`shardlog tail`: replays from --from, then prints live rows as they come, one line
    each; a refused stream is an error naming the field."""
    owner = _owner()
    start = clock.now() - timedelta(minutes=5)
    _post_audit(api, _audit(owner, 3, "denied old", start + timedelta(minutes=1)))
    env = {"SHARDLOG_TOKEN": api_token}
    args = ("tail", "audit", owner, "--q", "denied", "--from", start.isoformat())
    writer = threading.Timer(2.0, lambda: _post_audit(api, _audit(owner, 2, "denied new")))
    writer.start()
    done = run_cli(settings, *args, "--limit", "5", env=env)
    writer.join()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split(" ", 2)[2] for line in lines] == [
        "denied old 0 [replayed]",
        "denied old 1 [replayed]",
        "denied old 2 [replayed]",
        "denied new 0",
        "denied new 1",
    ]
    assert all(line.split(" ")[1] == owner for line in lines)
    refused = run_cli(settings, "tail", "audit", owner, "--match", "regex", "--q", "(", env=env)
    assert refused.returncode != 0
    foreign = issue_token(settings, f"other-{uuid.uuid4().hex[:6]}", DATA_SCOPES)
    denied = run_cli(settings, "tail", "audit", owner, env={"SHARDLOG_TOKEN": foreign})
    assert denied.returncode != 0 and "403 (owner)" in denied.stderr


def test_a_cursor_it_cannot_continue_is_a_400_naming_where_it_came_from(
    router_process: RouterProcess, api_token: str
) -> None:
    owner = _owner()
    with _tail(router_process, api_token, {"owner": owner}) as tail:
        cursor = tail.of("subscribed")[0].id
    assert cursor is not None
    for params, header, field in (
        ({"owner": owner, "after": "not-a-cursor"}, None, "after"),
        ({"owner": owner}, "not-a-cursor", "Last-Event-ID"),
        ({"owner": owner, "q": "other", "after": cursor}, None, "after"),
    ):
        client = TailClient(router_process.url, "/v1/audit/tail", params, api_token, header)
        client.start().wait(lambda c: c.status is not None and c.closed.is_set())
        assert client.status == 400
        assert orjson.loads(client.body)["error"]["field"] == field
