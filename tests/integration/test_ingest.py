"""The write path against the real cluster and router."""

from __future__ import annotations

import concurrent.futures
import uuid
from datetime import UTC, timedelta

import httpx
import orjson
import pytest

from bench.shard_view import catalog_shards, day_tables, owner_id, query_owner, shard_sql
from router import clock
from router.ingest.idempotency import tenant_key
from tests.support import past_day

# Rows carry an explicit ts on this day (noon, two days before the session's start): the day
# they land on is the same whatever the hour and however long the session runs.
DAY = past_day(2)


def stored(key: str) -> str:
    """How the Idempotency-Key of a write by the session's token (tenant system) is recorded."""
    return tenant_key("system", key)


def new_key(prefix: str = "owner") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def ndjson(records: list[dict]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def post_audit(api: httpx.Client, records: list[dict], **headers: str) -> httpx.Response:
    return api.post(
        "/v1/audit",
        content=ndjson(records),
        headers={"content-type": "application/x-ndjson", **headers},
    )


def post_flows(api: httpx.Client, records: list[dict], **headers: str) -> httpx.Response:
    return api.post("/v1/flows", json=records, headers=headers)


def audit_contents(api, cluster, owner: str) -> list[str]:
    ident = owner_id(api, "audit", owner)
    return (
        [] if ident is None else sorted(r[0] for r in query_owner(api, "audit", ident, "content"))
    )


def flow_rows(api, cluster, switch: str) -> list[list[str]]:
    ident = owner_id(api, "flow", switch)
    columns = "src_ip, dst_ip, src_port, dst_port, proto, bytes, packets, flow_count, ip_version"
    return [] if ident is None else sorted(query_owner(api, "flow", ident, columns))


# --- audit ---------------------------------------------------------------------------------


def test_audit_ndjson_and_json_array(api, cluster) -> None:
    owner = new_key()
    records = [
        {"owner": owner, "content": f"line {i}", "ts": DAY.isoformat(), "attrs": {"i": i}}
        for i in range(50)
    ]
    assert post_audit(api, records[:25]).json() == {"accepted": 25}
    response = api.post("/v1/audit", json=records[25:])
    assert response.status_code == 200
    assert response.json() == {"accepted": 25}
    assert audit_contents(api, cluster, owner) == sorted(r["content"] for r in records)
    ident = owner_id(api, "audit", owner)
    attrs = query_owner(api, "audit", ident, "attrs->>'i'")
    assert sorted(int(a[0]) for a in attrs) == list(range(50))


def test_audit_rows_land_in_utc_day_tables(api, cluster) -> None:
    owner = new_key()
    yesterday = DAY - timedelta(days=1)
    late = yesterday.replace(hour=23, minute=30).astimezone(
        __import__("datetime").timezone(timedelta(hours=-5))
    )
    response = post_audit(
        api,
        [
            {"owner": owner, "content": "a", "ts": DAY.isoformat()},
            {"owner": owner, "content": "b", "ts": late.isoformat()},  # next UTC day? no: same
        ],
    )
    assert response.status_code == 200
    ident = owner_id(api, "audit", owner)
    tables = {t for names in day_tables(api, "audit", ident).values() for t in names}
    expected_days = {DAY.strftime("%Y%m%d"), late.astimezone(UTC).strftime("%Y%m%d")}
    assert tables == {f"audit_o{ident}_{day}" for day in expected_days}


def test_ts_defaults_to_now(api, cluster) -> None:
    owner = new_key()
    # The router's clock, not the database's now(): the two differ under a shifted test clock.
    before = clock.time()
    assert post_audit(api, [{"owner": owner, "content": "now"}]).status_code == 200
    after = clock.time()
    ident = owner_id(api, "audit", owner)
    [[ts]] = query_owner(api, "audit", ident, "extract(epoch FROM ts)")
    assert before - 0.001 <= float(ts) <= after + 0.001


def test_one_bad_record_rejects_the_request_and_writes_nothing(api, cluster) -> None:
    owner = new_key()
    records = [{"owner": owner, "content": f"ok {i}"} for i in range(1000)]
    records.insert(700, {"owner": owner, "content": "bad", "ts": "not a time"})
    response = post_audit(api, records)
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["field"] == "records[700].ts"
    assert "records[700]" in error["message"]
    assert audit_contents(api, cluster, owner) == []


@pytest.mark.parametrize(
    ("record", "field", "status"),
    [
        ({"content": "x"}, "records[0].owner", 422),
        ({"owner": "o", "content": "x" * 70_000}, "records[0].content", 422),
        ({"owner": "o" * 257, "content": "x"}, "records[0].owner", 422),
        ({"owner": "o", "content": "x", "ts": "2999-01-01T00:00:00Z"}, "records[0].ts", 422),
        ({"owner": "o", "content": "x", "ts": "2001-01-01T00:00:00Z"}, "records[0].ts", 422),
        ({"owner": "o", "content": "x", "ts": "2026-01-01T00:00:00"}, "records[0].ts", 422),
        ({"owner": "o", "content": "x", "colour": "red"}, "records[0].colour", 422),
    ],
)
def test_audit_record_errors(api, record, field, status) -> None:
    response = post_audit(api, [record])
    assert response.status_code == status, response.text
    assert response.json()["error"]["field"] == field


def test_body_format_errors(api) -> None:
    response = api.post(
        "/v1/audit", content=b"{not json}\n", headers={"content-type": "application/x-ndjson"}
    )
    assert (response.status_code, response.json()["error"]["field"]) == (400, "records[0]")
    response = api.post(
        "/v1/audit", content=b"owner,content\n", headers={"content-type": "text/csv"}
    )
    assert (response.status_code, response.json()["error"]["field"]) == (415, "content-type")
    response = api.post("/v1/audit", json={"owner": "o", "content": "x"})
    assert (response.status_code, response.json()["error"]["field"]) == (422, "body")
    assert api.post("/v1/audit", json=[]).json() == {"accepted": 0}


def test_hostile_owner_keys_get_tables_of_their_own(api, cluster) -> None:
    suffix = uuid.uuid4().hex[:6]
    keys = [
        f"robert'); DROP TABLE owners;-- {suffix}",
        f'quo"te {suffix}',
        f"ünïcødé 🚀 {suffix}",
        (suffix + "x" * 256)[:256],
        ("p" * 70) + f"-{suffix}-one",
        ("p" * 70) + f"-{suffix}-two",
    ]
    response = post_audit(api, [{"owner": key, "content": key} for key in keys])
    assert response.status_code == 200, response.text
    seen_tables: set[str] = set()
    for key in keys:
        assert audit_contents(api, cluster, key) == [key]
        ident = owner_id(api, "audit", key)
        tables = {t for names in day_tables(api, "audit", ident).values() for t in names}
        assert tables and not tables & seen_tables
        seen_tables |= tables


def test_concurrent_first_writes_create_one_table(api, cluster) -> None:
    owner = new_key()

    def write(n: int) -> int:
        with httpx.Client(
            base_url=str(api.base_url),
            timeout=30,
            headers={"authorization": api.headers["authorization"]},
        ) as client:
            return post_audit(
                client,
                [{"owner": owner, "content": f"{n}-{i}", "ts": DAY.isoformat()} for i in range(20)],
            ).status_code

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(write, range(32)))
    assert statuses == [200] * 32
    assert len(audit_contents(api, cluster, owner)) == 32 * 20
    ident = owner_id(api, "audit", owner)
    for tables in day_tables(api, "audit", ident).values():
        assert tables == [f"audit_o{ident}_{DAY:%Y%m%d}"]


def test_large_requests_spread_over_the_group(api, cluster) -> None:
    owner = new_key()
    api.put(
        "/v1/admin/owners",
        json={"kind": "audit", "key": owner, "group": "group1", "tenant": "system"},
    )
    group_shards = {
        s["name"]
        for s in api.get("/v1/admin/shards").json()
        if s["group"] == "group1" and s["state"] == "active"
    }
    count = 1000 * len(group_shards)  # enough for one part per shard
    records = [{"owner": owner, "content": f"row {i}"} for i in range(count)]
    assert post_audit(api, records).json() == {"accepted": count}
    ident = owner_id(api, "audit", owner)
    assert set(day_tables(api, "audit", ident)) == group_shards


def test_shard_down_during_audit_ingest_is_invisible_to_clients(api, cluster) -> None:
    owner = new_key()
    group = api.put(
        "/v1/admin/owners",
        json={"kind": "audit", "key": owner, "group": "group1", "tenant": "system"},
    ).json()["group"]
    victim = next(s for s in cluster.shards if s.spec.group == group)
    victim.stop()
    try:
        statuses = [
            post_audit(
                api, [{"owner": owner, "content": f"{n}-{i}"} for i in range(200)]
            ).status_code
            for n in range(10)
        ]
    finally:
        victim.start()
    assert statuses == [200] * 10
    ident = owner_id(api, "audit", owner)
    placed = day_tables(api, "audit", ident)
    assert victim.spec.name not in placed
    assert len(audit_contents(api, cluster, owner)) == 2000


# --- idempotency ---------------------------------------------------------------------------


def test_retry_with_the_same_key_stores_nothing_twice(api, cluster) -> None:
    owner = new_key()
    records = [{"owner": owner, "content": f"r{i}"} for i in range(3000)]
    key = new_key("idem")
    first = post_audit(api, records, **{"Idempotency-Key": key})
    again = post_audit(api, records, **{"Idempotency-Key": key})
    assert first.json() == again.json() == {"accepted": 3000}
    assert len(audit_contents(api, cluster, owner)) == 3000


def test_same_key_with_another_body_is_refused(api) -> None:
    key = new_key("idem")
    owner = new_key()
    assert (
        post_audit(api, [{"owner": owner, "content": "a"}], **{"Idempotency-Key": key}).status_code
        == 200
    )
    response = post_audit(api, [{"owner": owner, "content": "b"}], **{"Idempotency-Key": key})
    assert (response.status_code, response.json()["error"]["field"]) == (422, "Idempotency-Key")


def test_bad_idempotency_key(api) -> None:
    response = post_audit(api, [{"owner": "o", "content": "a"}], **{"Idempotency-Key": "x" * 300})
    assert (response.status_code, response.json()["error"]["field"]) == (422, "Idempotency-Key")


async def test_retry_after_a_crash_mid_request_uses_the_ledger(api, cluster, settings) -> None:
    """A router that died after some batches committed leaves the key 'running'; once its
    lease ends a retry writes only the missing batches."""
    import asyncpg

    owner = new_key()
    records = [{"owner": owner, "content": f"r{i}"} for i in range(5000)]
    key = new_key("idem")
    assert post_audit(api, records, **{"Idempotency-Key": key}).status_code == 200
    ident = owner_id(api, "audit", owner)
    # Undo one committed batch (as if it never ran) and mark the attempt as crashed.
    shard, tables = next(iter(day_tables(api, "audit", ident).items()))
    shard_sql(
        catalog_shards(api)[shard],
        f"DELETE FROM ingest_ledger WHERE request_key = '{stored(key)}' "
        f"AND table_name = '{tables[0]}'; "
        f"TRUNCATE {tables[0]}",
    )
    metadata = await asyncpg.connect(settings.metadata_dsn())
    try:
        await metadata.execute(
            "UPDATE idempotency_requests SET state = 'running', lease_until = now() WHERE key = $1",
            stored(key),
        )
    finally:
        await metadata.close()
    missing = len(audit_contents(api, cluster, owner))
    assert missing < 5000
    assert post_audit(api, records, **{"Idempotency-Key": key}).json() == {"accepted": 5000}
    assert sorted(audit_contents(api, cluster, owner)) == sorted(r["content"] for r in records)


def test_request_in_flight_with_the_same_key_conflicts(api, settings) -> None:
    import asyncio

    import asyncpg

    key = new_key("idem")
    owner = new_key()
    body = [{"owner": owner, "content": "x"}]

    async def hold() -> None:
        connection = await asyncpg.connect(settings.metadata_dsn())
        try:
            await connection.execute(
                "INSERT INTO idempotency_requests (key, kind, body_hash, state, lease_until) "
                "VALUES ($1, 'audit', $2, 'running', now() + interval '1 hour')",
                stored(key),
                __import__("hashlib").sha256(ndjson(body)).hexdigest(),
            )
        finally:
            await connection.close()

    asyncio.run(hold())
    response = post_audit(api, body, **{"Idempotency-Key": key})
    assert response.status_code == 409
    assert response.headers["retry-after"] == "1"


# --- flows ---------------------------------------------------------------------------------


def flow(switch: str, n: int, **extra) -> dict:
    return {
        "switch": switch,
        "src_ip": f"10.1.{n // 250}.{n % 250}",
        "dst_ip": "192.0.2.1",
        "src_port": 1000 + n,
        "dst_port": 443,
        "proto": 6,
        "bytes": 100,
        "packets": 2,
        "ts": DAY.isoformat(),
        **extra,
    }


def test_repeated_flows_merge(api, cluster) -> None:
    switch = new_key("sw")
    # The three writes of flow 1 on one day (flows merge per day), the first ten minutes early.
    late = DAY
    early = (late - timedelta(minutes=10)).isoformat()
    assert post_flows(api, [flow(switch, 1, ts=early), flow(switch, 2)]).status_code == 200
    again = [flow(switch, 1, ts=late.isoformat()), flow(switch, 1, bytes=50, ts=late.isoformat())]
    assert post_flows(api, again).status_code == 200
    rows = flow_rows(api, cluster, switch)
    assert [r[:2] + r[5:] for r in rows] == [
        ["10.1.0.1", "192.0.2.1", "250", "6", "3", "4"],
        ["10.1.0.2", "192.0.2.1", "100", "2", "1", "4"],
    ]
    ident = owner_id(api, "flow", switch)
    [[span]] = query_owner(
        api,
        "flow",
        ident,
        "extract(epoch FROM last_seen - first_seen)::int",
        "src_port = 1001",
    )
    assert int(span) >= 599


def test_flows_without_proto_merge_too(api, cluster) -> None:
    switch = new_key("sw")
    record = {
        "switch": switch,
        "src_ip": "10.0.0.1",
        "dst_ip": "10.0.0.2",
        "src_port": 1,
        "dst_port": 2,
        "bytes": 1,
        "ts": DAY.isoformat(),  # both writes on one day whatever the hour: they merge
    }
    post_flows(api, [record])
    post_flows(api, [record])
    assert [r[4:] for r in flow_rows(api, cluster, switch)] == [["", "2", "0", "2", "4"]]


def test_ipv6_forms_are_stored_canonically_and_merge(api, cluster) -> None:
    switch = new_key("sw")
    forms = ["2001:DB8:0:0:0:0:0:1", "2001:db8::1", "2001:0db8:0000:0000::0001"]
    post_flows(
        api,
        [
            {
                "switch": switch,
                "src_ip": form,
                "dst_ip": "::ffff:192.0.2.1",
                "src_port": 5,
                "dst_port": 6,
                "bytes": 1,
            }
            for form in forms
        ],
    )
    [row] = flow_rows(api, cluster, switch)
    assert row[:2] == ["2001:db8::1", "::ffff:192.0.2.1"]
    assert row[7:] == ["3", "6"]


@pytest.mark.parametrize(
    ("newline", "header", "final"),
    [("\n", True, True), ("\r\n", False, False), ("\r\n", True, False), ("\n", False, True)],
)
def test_csv_flows(api, cluster, newline, header, final) -> None:
    switch = new_key("sw")
    lines = (["src_ip,dest_ip,src_port,dest_port,ip_type"] if header else []) + [
        "10.0.0.1,10.0.0.2,1,2,IPv4",
        "2001:DB8::1,2001:db8::2,3,4,IPv6",
    ]
    body = newline.join(lines) + (newline if final else "")
    response = api.post(
        "/v1/flows",
        params={"switch": switch},
        content=body.encode(),
        headers={"content-type": "text/csv"},
    )
    assert response.json() == {"accepted": 2}
    rows = flow_rows(api, cluster, switch)
    assert [(r[0], r[8]) for r in rows] == [("10.0.0.1", "4"), ("2001:db8::1", "6")]


def test_csv_with_extra_columns_and_errors(api, cluster) -> None:
    switch = new_key("sw")
    body = (
        b"src_ip,dest_ip,src_port,dest_port,ip_type,bytes,packets\n"
        b"10.0.0.1,10.0.0.2,1,2,IPv4,1500,3\n"
    )
    response = api.post(
        "/v1/flows", params={"switch": switch}, content=body, headers={"content-type": "text/csv"}
    )
    assert response.status_code == 200
    assert flow_rows(api, cluster, switch)[0][5:7] == ["1500", "3"]
    bad = b"10.0.0.1,10.0.0.2,1,2,IPv4\n10.0.0.1,10.0.0.2,1,99999,IPv4\n"
    response = api.post(
        "/v1/flows",
        params={"switch": new_key("sw")},
        content=bad,
        headers={"content-type": "text/csv"},
    )
    assert (response.status_code, response.json()["error"]["field"]) == (422, "lines[2].dst_port")
    response = api.post("/v1/flows", content=bad, headers={"content-type": "text/csv"})
    assert (response.status_code, response.json()["error"]["field"]) == (422, "lines[1].switch")
    mismatch = b"10.0.0.1,10.0.0.2,1,2,IPv6\n"
    response = api.post(
        "/v1/flows",
        params={"switch": switch},
        content=mismatch,
        headers={"content-type": "text/csv"},
    )
    assert (response.status_code, response.json()["error"]["field"]) == (422, "lines[1].ip_version")


def test_flow_ndjson(api, cluster) -> None:
    switch = new_key("sw")
    response = api.post(
        "/v1/flows",
        content=ndjson([flow(switch, n) for n in range(10)]),
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.json() == {"accepted": 10}
    assert len(flow_rows(api, cluster, switch)) == 10


def test_delete_flows(api, cluster) -> None:
    switch = new_key("sw")
    post_flows(api, [flow(switch, n) for n in range(5)])
    doomed = [
        {k: flow(switch, n)[k] for k in ("src_ip", "dst_ip", "src_port", "dst_port", "proto")}
        for n in (1, 3)
    ]
    day = DAY.date().isoformat()
    body = {"switch": switch, "from": day, "to": day, "flows": doomed}
    response = api.request("DELETE", "/v1/flows", json=body)
    assert response.json() == {"removed": 2}
    assert api.request("DELETE", "/v1/flows", json=body).json() == {"removed": 0}
    assert sorted(int(r[2]) for r in flow_rows(api, cluster, switch)) == [1000, 1002, 1004]
    unknown = {**body, "switch": new_key("nobody")}
    assert api.request("DELETE", "/v1/flows", json=unknown).json() == {"removed": 0}
    backwards = {**body, "from": "2026-02-02", "to": "2026-02-01"}
    response = api.request("DELETE", "/v1/flows", json=backwards)
    assert (response.status_code, response.json()["error"]["field"]) == (422, "to")


def test_flow_batch_for_a_down_shard_is_503_and_retry_is_exact(api, cluster) -> None:
    switch = new_key("sw")
    api.put(
        "/v1/admin/owners",
        json={"kind": "flow", "key": switch, "group": "group2", "tenant": "system"},
    )
    records = [flow(switch, n) for n in range(400)]
    victim = next(s for s in cluster.shards if s.spec.group == "group2")
    key = new_key("idem")
    victim.stop()
    try:
        response = post_flows(api, records, **{"Idempotency-Key": key})
        assert response.status_code == 503
        assert victim.spec.name in response.json()["error"]["message"]
        assert response.headers["retry-after"] == "1"
    finally:
        victim.start()
    partial = flow_rows(api, cluster, switch)
    assert 0 < len(partial) < 400  # the other shards' batches committed
    response = post_flows(api, records, **{"Idempotency-Key": key})
    assert response.json() == {"accepted": 400}
    rows = flow_rows(api, cluster, switch)
    assert len(rows) == 400
    assert {(r[5], r[7]) for r in rows} == {("100", "1")}  # merged once, not twice


def test_shard_stopped_during_ingest_loses_and_duplicates_nothing(api, cluster) -> None:
    """Writers keep going while a shard of their group stops for a few seconds; a client that
    retries with the same Idempotency-Key (as documented) gets every request acknowledged, each
    row once. A part whose COMMIT was cut off is in doubt and stays on its shard, so its
    request is acknowledged only once that shard is back."""
    import threading
    import time

    owner = new_key()
    api.put(
        "/v1/admin/owners",
        json={"kind": "audit", "key": owner, "group": "group2", "tenant": "system"},
    )
    victim = next(s for s in cluster.shards if s.spec.group == "group2")
    requests = [[{"owner": owner, "content": f"{n}-{i}"} for i in range(500)] for n in range(40)]

    def write(batch: list[dict], key: str) -> int:
        with httpx.Client(
            base_url=str(api.base_url),
            timeout=60,
            headers={"authorization": api.headers["authorization"]},
        ) as client:
            deadline = time.monotonic() + 45
            while True:
                status = post_audit(client, batch, **{"Idempotency-Key": key}).status_code
                if status not in (409, 503) or time.monotonic() > deadline:
                    return status
                time.sleep(0.2)

    stopper = threading.Timer(0.3, victim.stop)
    restarter = threading.Timer(3.0, victim.start)
    stopper.start()
    restarter.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            statuses = list(pool.map(write, requests, [new_key("idem") for _ in requests]))
    finally:
        stopper.join()
        restarter.join()
        victim.start()
    assert statuses == [200] * len(requests)
    contents = audit_contents(api, cluster, owner)
    assert len(contents) == len(set(contents)) == 40 * 500


async def test_keyed_retry_gives_untimed_records_the_first_attempts_now(
    api, cluster, settings
) -> None:
    """Records without ts get the first attempt's time on every retry, so a retry after
    midnight still finds its batches in the same day tables."""
    import asyncio

    import asyncpg

    owner = new_key()
    key = new_key("idem")
    records = [{"owner": owner, "content": f"r{i}"} for i in range(50)]
    assert post_audit(api, records, **{"Idempotency-Key": key}).status_code == 200
    ident = owner_id(api, "audit", owner)
    metadata = await asyncpg.connect(settings.metadata_dsn())
    try:
        recorded = await metadata.fetchval(
            "SELECT (placement->>'now')::timestamptz FROM idempotency_requests WHERE key = $1",
            stored(key),
        )
        # Undo the committed batch as if it never happened, and fail the attempt.
        for shard, tables in day_tables(api, "audit", ident).items():
            shard_sql(
                catalog_shards(api)[shard],
                f"DELETE FROM ingest_ledger WHERE request_key = '{stored(key)}'; "
                f"TRUNCATE {tables[0]}",
            )
        await metadata.execute(
            "UPDATE idempotency_requests SET state = 'failed' WHERE key = $1", stored(key)
        )
        await asyncio.sleep(1.1)  # a retry's own now would differ by a second
        assert post_audit(api, records, **{"Idempotency-Key": key}).status_code == 200
    finally:
        await metadata.close()
    stamps = {
        row[0] for row in query_owner(api, "audit", ident, "extract(epoch FROM ts)::numeric(20,6)")
    }
    assert stamps == {f"{recorded.timestamp():.6f}"}
    assert len(audit_contents(api, cluster, owner)) == 50
