"""Search against the real cluster: pages compared with an oracle that reads every shard
directly and sorts in one place."""

from __future__ import annotations

import base64
import ipaddress
import itertools
import random
import uuid
from datetime import UTC, datetime, timedelta

import orjson
import pytest
from fastapi.testclient import TestClient

from bench.shard_view import catalog_shards, ordered_rows, owner_id, shard_sql
from router import clock
from router.app import create_app
from router.settings import SearchSettings
from tests.support import bearer

# Two days back: rows up to 47 h after DAY are in the past at any time of day (one day back
# put rows of "tomorrow" in the future in the early hours UTC, refused as such).
DAY = clock.now().replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=2)
FROM, TO = DAY.isoformat(), (DAY + timedelta(days=2)).isoformat()
WORDS = ["abc", "bcd", "cde", "fed", "ABC"]


def post(api, path, records):
    response = api.post(
        path,
        content=b"".join(orjson.dumps(r) + b"\n" for r in records),
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.status_code == 200, response.text


def oracle(api, kind: str, key: str, columns: str) -> list[list[str]]:
    """Every row of the owner from every shard, sorted by (ts, shard, id) in one place."""
    rows = ordered_rows(api, kind, [owner_id(api, kind, key)], columns)
    return [[ts, shard, ident, *rest] for ts, shard, _, ident, *rest in rows]


def key_of(item) -> tuple[str, str, int]:
    ts = datetime.fromisoformat(item.get("ts") or item["first_seen"]).astimezone(UTC)
    return (ts.strftime("%Y-%m-%d %H:%M:%S.%f"), item["shard"], item["id"])


def cursor_position(cursor: str | None) -> tuple | None:
    """What a cursor points at, read past its signature (its issue time differs by request)."""
    if cursor is None:
        return None
    body = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))[16:])
    return (body["q"], body["d"], body["t"], body["s"], body["o"], body["i"])


def all_pages(api, path, params, limit, direction="next"):
    pages, cursor = [], None
    while True:
        response = api.get(
            path, params={**params, "limit": limit, **({"cursor": cursor} if cursor else {})}
        )
        assert response.status_code == 200, response.text
        body = response.json()
        pages.append(body)
        cursor = body["next_cursor"] if direction == "next" else body["prev_cursor"]
        if cursor is None:
            return pages


@pytest.fixture(scope="module")
def audit_owner(api) -> str:
    owner = f"search-{uuid.uuid4().hex[:8]}"
    rng = random.Random(7)
    # Twelve requests land on several shards; few distinct timestamps make ties across shards.
    for request in range(12):
        post(
            api,
            "/v1/audit",
            [
                {
                    "owner": owner,
                    "ts": (
                        DAY
                        + timedelta(hours=rng.choice([1, 5, 23, 25, 30]), seconds=rng.randrange(4))
                    ).isoformat(),
                    "content": " ".join(rng.choice(WORDS) for _ in range(4)) + f" #{request}-{i}",
                }
                for i in range(50)
            ],
        )
    return owner


def test_rows_span_several_shards(api, audit_owner) -> None:
    assert len({r[1] for r in oracle(api, "audit", audit_owner, "content")}) >= 2


@pytest.mark.parametrize("limit", [7, 100, 1000])
def test_forward_pages_equal_the_oracle(api, audit_owner, limit) -> None:
    expected = [(r[0], r[1], r[2]) for r in oracle(api, "audit", audit_owner, "content")]
    pages = all_pages(
        api, "/v1/audit/search", {"owner": audit_owner, "from": FROM, "to": TO}, limit
    )
    got = [key_of(item) for page in pages for item in page["items"]]
    assert got == expected
    assert all(not page["partial"] for page in pages)


def test_backward_paging_returns_the_same_rows(api, audit_owner) -> None:
    params = {"owner": audit_owner, "from": FROM, "to": TO}
    forward = all_pages(api, "/v1/audit/search", params, 9)
    # From the last page, walk back with prev cursors.
    back, cursor = [forward[-1]["items"]], forward[-1]["prev_cursor"]
    while cursor:
        body = api.get("/v1/audit/search", params={**params, "limit": 9, "cursor": cursor}).json()
        back.insert(0, body["items"])
        cursor = body["prev_cursor"]
    assert [key_of(i) for page in back for i in page] == [
        key_of(i) for page in forward for i in page["items"]
    ]


def test_descending_order(api, audit_owner) -> None:
    expected = [(r[0], r[1], r[2]) for r in oracle(api, "audit", audit_owner, "content")]
    pages = all_pages(
        api, "/v1/audit/search", {"owner": audit_owner, "from": FROM, "to": TO, "order": "desc"}, 11
    )
    assert [key_of(i) for page in pages for i in page["items"]] == expected[::-1]


@pytest.mark.parametrize(
    ("match", "patterns", "test"),
    [
        ("substring", ["abc"], lambda c: "abc" in c),
        ("substring", ["abc", "bcd"], lambda c: "abc" in c and "bcd" in c),
        ("substring", ["ABC"], lambda c: "ABC" in c),
        ("regex", ["^abc", "fed"], lambda c: c.startswith("abc") and "fed" in c),
        ("iregex", ["^abc"], lambda c: c.lower().startswith("abc")),
    ],
)
def test_patterns_and_exact_count(api, audit_owner, match, patterns, test) -> None:
    expected = [
        (r[0], r[1], r[2]) for r in oracle(api, "audit", audit_owner, "content") if test(r[3])
    ]
    params = {"owner": audit_owner, "from": FROM, "to": TO, "q": patterns, "match": match}
    pages = all_pages(api, "/v1/audit/search", {**params, "count": "exact"}, 50)
    assert [key_of(i) for page in pages for i in page["items"]] == expected
    assert pages[0]["count"] == {
        "value": len(expected),
        "exact": True,
        "method": "count",
        "bounds": None,
    }
    # A range this small is counted even for an estimate (test_search_estimate.py samples).
    estimate = api.get("/v1/audit/search", params={**params, "count": "estimate"}).json()
    assert estimate["count"] == pages[0]["count"]


def test_rows_inserted_while_paging_do_not_disturb_it(api, audit_owner) -> None:
    params = {"owner": audit_owner, "from": FROM, "to": TO}
    before = {(r[0], r[1], r[2]) for r in oracle(api, "audit", audit_owner, "content")}
    first = api.get("/v1/audit/search", params={**params, "limit": 40}).json()
    post(
        api,
        "/v1/audit",
        [
            {"owner": audit_owner, "content": "late", "ts": (DAY + timedelta(hours=h)).isoformat()}
            for h in (0, 5, 5, 30)
        ],
    )
    seen = [key_of(i) for i in first["items"]]
    cursor = first["next_cursor"]
    while cursor:
        body = api.get("/v1/audit/search", params={**params, "limit": 40, "cursor": cursor}).json()
        seen += [key_of(i) for i in body["items"]]
        cursor = body["next_cursor"]
    assert len(seen) == len(set(seen))
    assert before <= set(seen)
    assert seen == sorted(seen)


def test_export_streams_every_match(api, audit_owner) -> None:
    expected = [(r[0], r[1], r[2]) for r in oracle(api, "audit", audit_owner, "content")]
    response = api.get("/v1/audit/export", params={"owner": audit_owner, "from": FROM, "to": TO})
    assert response.headers["content-type"].startswith("application/x-ndjson")
    assert [key_of(orjson.loads(line)) for line in response.content.splitlines()] == expected


def test_unknown_owner_is_an_empty_page(api) -> None:
    body = api.get(
        "/v1/audit/search",
        params={"owner": "nobody-" + uuid.uuid4().hex, "from": FROM, "to": TO, "count": "exact"},
    ).json()
    assert body["items"] == [] and body["next_cursor"] is None
    assert body["count"] == {"value": 0, "exact": True, "method": "count", "bounds": None}


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"q": "(", "match": "regex"}, "q"),
        ({"q": "x" * 300}, "q"),
        ({"to": "2020-01-01T00:00:00Z"}, "to"),
        ({"from": "2020-01-01T00:00:00Z"}, "to"),
        ({"limit": 100_000}, "limit"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"cursor": "A" * 8193}, "cursor"),
        ({"match": "glob"}, "match"),
    ],
)
def test_bad_parameters_name_the_field(api, audit_owner, params, field) -> None:
    response = api.get(
        "/v1/audit/search", params={"owner": audit_owner, "from": FROM, "to": TO, **params}
    )
    assert response.status_code in (400, 422), response.text
    assert response.json()["error"]["field"] == field


def test_cursor_of_another_query_is_refused(api, audit_owner) -> None:
    params = {"owner": audit_owner, "from": FROM, "to": TO, "limit": 5}
    cursor = api.get("/v1/audit/search", params=params).json()["next_cursor"]
    response = api.get("/v1/audit/search", params={**params, "q": "abc", "cursor": cursor})
    assert (response.status_code, response.json()["error"]["field"]) == (400, "cursor")
    tampered = cursor[:-3] + ("AAA" if not cursor.endswith("AAA") else "BBB")
    response = api.get("/v1/audit/search", params={**params, "cursor": tampered})
    assert (response.status_code, response.json()["error"]["field"]) == (400, "cursor")


def test_stopped_shard_gives_a_partial_answer(api, audit_owner, cluster) -> None:
    everything = oracle(api, "audit", audit_owner, "content")
    dsns = catalog_shards(api)
    victim = next(
        i for i in cluster.shards if any(f":{i.spec.port}/" in dsns[r[1]] for r in everything)
    )
    params = {"owner": audit_owner, "from": FROM, "to": TO, "limit": 1000}
    # Every catalog shard served by the stopped instance goes down with it.
    down = {name for name, dsn in catalog_shards(api).items() if f":{victim.spec.port}/" in dsn}
    holding = {r[1] for r in everything}
    victim.stop()
    try:
        body = api.get("/v1/audit/search", params=params).json()
        assert body["partial"] is True
        assert {f["shard"] for f in body["failed_shards"]} == down & holding
        assert {i["shard"] for i in body["items"]} <= holding - down
        assert len(body["items"]) == sum(1 for r in everything if r[1] not in down)
        strict = api.get("/v1/audit/search", params={**params, "partial": "false"})
        assert strict.status_code == 503
        assert all(name in strict.json()["error"]["message"] for name in down & holding)
    finally:
        victim.start()


def test_shard_timeout_is_504_when_partial_is_refused(
    settings, cluster, api, api_token, audit_owner
) -> None:
    hasty = settings.model_copy(update={"search": SearchSettings(shard_timeout_s=0.000001)})
    with TestClient(create_app(hasty), headers=bearer(api_token)) as client:
        params = {"owner": audit_owner, "from": FROM, "to": TO}
        response = client.get("/v1/audit/search", params={**params, "partial": "false"})
        assert response.status_code == 504
        assert "SHARDLOG_SEARCH__SHARD_TIMEOUT_S" in response.json()["error"]["message"]
        assert client.get("/v1/audit/search", params=params).json()["partial"] is True


# --- flows ---------------------------------------------------------------------------------

FLOW_SOURCES = ["10.1.0.5", "10.1.7.9", "10.2.0.1", "2001:db8::5", "2001:db8:0:1::9"]
FLOW_TARGETS = ["192.0.2.1", "192.0.2.77", "2001:db8:ff::1"]


@pytest.fixture(scope="module")
def flow_switch(api) -> tuple[str, list[dict]]:
    switch = f"search-sw-{uuid.uuid4().hex[:8]}"
    rng = random.Random(3)
    flows = []
    for n in range(150):
        src = rng.choice(FLOW_SOURCES)
        dst = rng.choice([t for t in FLOW_TARGETS if (":" in t) == (":" in src)])
        if n % 10 == 0 and flows:  # some reverse flows for either_direction
            previous = flows[-1]
            src, dst = previous["dst_ip"], previous["src_ip"]
        flows.append(
            {
                "switch": switch,
                "src_ip": src,
                "dst_ip": dst,
                "src_port": rng.choice([53, 443, 1500, 40000 + n]),
                "dst_port": rng.choice([53, 443, 8080]),
                "proto": rng.choice([6, 17]),
                "bytes": 10,
                "ts": (DAY + timedelta(hours=3, seconds=n)).isoformat(),
            }
        )
    post(api, "/v1/flows", flows)
    return switch, flows


def flow_key(item) -> tuple:
    return (
        str(ipaddress.ip_address(item["src_ip"])),
        str(ipaddress.ip_address(item["dst_ip"])),
        int(item["src_port"]),
        int(item["dst_port"]),
        int(item["proto"]),
    )


def matches(flow, filters, either=False) -> bool:
    def one_way(src, dst, sport, dport) -> bool:
        if "src_ip" in filters and not _within(src, filters["src_ip"]):
            return False
        if "dst_ip" in filters and not _within(dst, filters["dst_ip"]):
            return False
        if "src_port" in filters and not _in_range(sport, filters["src_port"]):
            return False
        return not ("dst_port" in filters and not _in_range(dport, filters["dst_port"]))

    if "proto" in filters and flow["proto"] != filters["proto"]:
        return False
    forward = one_way(flow["src_ip"], flow["dst_ip"], flow["src_port"], flow["dst_port"])
    backward = either and one_way(
        flow["dst_ip"], flow["src_ip"], flow["dst_port"], flow["src_port"]
    )
    return forward or backward


def _within(address: str, network: str) -> bool:
    ip, net = ipaddress.ip_address(address), ipaddress.ip_network(network, strict=False)
    return ip.version == net.version and ip in net


def _in_range(port, spec) -> bool:
    low, _, high = str(spec).partition("-")
    return int(low) <= port <= int(high or low)


FILTER_VALUES = {
    "src_ip": "10.1.0.5",
    "dst_ip": "192.0.2.1",
    "src_port": "443",
    "dst_port": "53",
    "proto": 17,
}


@pytest.mark.parametrize(
    "names", [c for n in range(6) for c in itertools.combinations(FILTER_VALUES, n)]
)
def test_every_partial_key_combination(api, flow_switch, names) -> None:
    switch, flows = flow_switch
    filters = {name: FILTER_VALUES[name] for name in names}
    expected = sorted({flow_key(f) for f in flows if matches(f, filters)})
    body = api.get(
        "/v1/flows/search",
        params={"switch": switch, "from": FROM, "to": TO, "limit": 1000, **filters},
    ).json()
    assert sorted(flow_key(i) for i in body["items"]) == expected


@pytest.mark.parametrize(
    "filters",
    [
        {"src_ip": "10.1.0.0/16"},
        {"src_ip": "10.0.0.0/8", "dst_port": "1-100"},
        {"src_ip": "2001:DB8:0:0:0:0:0:5"},
        {"src_ip": "2001:0db8::/48"},
        {"src_port": "40000-40100"},
        {"dst_ip": "2001:db8:ff::1", "src_ip": "2001:db8::/32"},
    ],
)
def test_cidr_ranges_and_ipv6_forms(api, flow_switch, filters) -> None:
    switch, flows = flow_switch
    expected = sorted({flow_key(f) for f in flows if matches(f, filters)})
    assert expected, "the data set should cover every filter"
    body = api.get(
        "/v1/flows/search",
        params={"switch": switch, "from": FROM, "to": TO, "limit": 1000, **filters},
    ).json()
    assert sorted(flow_key(i) for i in body["items"]) == expected


def test_either_direction(api, flow_switch) -> None:
    switch, flows = flow_switch
    filters = {"src_ip": "192.0.2.1", "dst_port": "443"}
    expected = sorted({flow_key(f) for f in flows if matches(f, filters, either=True)})
    assert expected
    body = api.get(
        "/v1/flows/search",
        params={
            "switch": switch,
            "from": FROM,
            "to": TO,
            "limit": 1000,
            "either_direction": "true",
            **filters,
        },
    ).json()
    assert sorted(flow_key(i) for i in body["items"]) == expected


def test_flow_pages_equal_the_oracle(api, flow_switch) -> None:
    switch, _ = flow_switch
    expected = [(r[0], r[1], r[2]) for r in oracle(api, "flow", switch, "src_ip")]
    pages = all_pages(api, "/v1/flows/search", {"switch": switch, "from": FROM, "to": TO}, 13)
    assert [key_of(i) for page in pages for i in page["items"]] == expected


def test_mixed_ip_versions_are_refused(api, flow_switch) -> None:
    response = api.get(
        "/v1/flows/search",
        params={
            "switch": flow_switch[0],
            "from": FROM,
            "to": TO,
            "src_ip": "10.0.0.1",
            "dst_ip": "2001:db8::1",
        },
    )
    assert (response.status_code, response.json()["error"]["field"]) == (400, "ip_version")


# --- the fdw path: identical pages to fan-out and to the oracle -----------------------------


@pytest.mark.parametrize(("limit", "order"), [(7, "asc"), (50, "desc"), (1000, "asc")])
def test_fdw_pages_equal_fanout_and_oracle(api, audit_owner, limit, order) -> None:
    expected = [(r[0], r[1], r[2]) for r in oracle(api, "audit", audit_owner, "content")]
    if order == "desc":
        expected.reverse()
    params = {"owner": audit_owner, "from": FROM, "to": TO, "order": order}
    fanout = all_pages(api, "/v1/audit/search", {**params, "backend": "fanout"}, limit)
    fdw = all_pages(api, "/v1/audit/search", {**params, "backend": "fdw"}, limit)
    assert [[key_of(i) for i in p["items"]] for p in fdw] == [
        [key_of(i) for i in p["items"]] for p in fanout
    ]
    assert [cursor_position(p["next_cursor"]) for p in fdw] == [
        cursor_position(p["next_cursor"]) for p in fanout
    ]
    assert [key_of(i) for p in fdw for i in p["items"]] == expected
    assert fdw[0]["items"] == fanout[0]["items"]


@pytest.mark.parametrize(
    ("match", "patterns"),
    [("substring", ["abc", "bcd"]), ("iregex", ["^abc"]), ("regex", ["fed$"])],
)
def test_fdw_patterns_and_counts_equal_fanout(api, audit_owner, match, patterns) -> None:
    params = {
        "owner": audit_owner,
        "from": FROM,
        "to": TO,
        "q": patterns,
        "match": match,
        "count": "exact",
        "limit": 1000,
    }
    fanout = api.get("/v1/audit/search", params={**params, "backend": "fanout"}).json()
    fdw = api.get("/v1/audit/search", params={**params, "backend": "fdw"}).json()
    assert fdw["items"] == fanout["items"]
    assert fdw["count"] == fanout["count"]


@pytest.mark.parametrize(
    "filters",
    [
        {},
        {"src_ip": "10.1.0.0/16"},
        {"dst_port": "53", "proto": 17},
        {"src_ip": "2001:DB8::5"},
        {"src_ip": "192.0.2.1", "either_direction": "true"},
    ],
)
def test_fdw_flow_filters_equal_fanout(api, flow_switch, filters) -> None:
    params = {"switch": flow_switch[0], "from": FROM, "to": TO, "limit": 1000, **filters}
    fanout = api.get("/v1/flows/search", params={**params, "backend": "fanout"}).json()
    fdw = api.get("/v1/flows/search", params={**params, "backend": "fdw"}).json()
    assert fdw["items"] == fanout["items"]
    assert fdw["items"] or filters


def test_fdw_bad_regex_is_400(api, audit_owner) -> None:
    response = api.get(
        "/v1/audit/search",
        params={
            "owner": audit_owner,
            "from": FROM,
            "to": TO,
            "q": "(",
            "match": "regex",
            "backend": "fdw",
        },
    )
    assert (response.status_code, response.json()["error"]["field"]) == (400, "q")


def test_tables_sync_registers_and_attaches_what_shards_hold(api, settings, audit_owner) -> None:
    """A registry entry lost (as after a restore) comes back with `shardlog tables sync`,
    and the fdw path sees the table again."""
    from tests.support import run_cli

    ident = owner_id(api, "audit", audit_owner)
    params = {"owner": audit_owner, "from": FROM, "to": TO, "limit": 1000}
    before = api.get("/v1/audit/search", params={**params, "backend": "fdw"}).json()["items"]
    shard_sql(
        settings.metadata_dsn(),
        f"DELETE FROM day_tables WHERE kind = 'audit' AND owner_id = {ident}",
    )
    assert api.get("/v1/audit/search", params=params).json()["items"] == []
    result = run_cli(settings, "tables", "sync")
    assert result.returncode == 0, result.stderr
    assert api.get("/v1/audit/search", params=params).json()["items"] == before
    assert (
        api.get("/v1/audit/search", params={**params, "backend": "fdw"}).json()["items"] == before
    )
