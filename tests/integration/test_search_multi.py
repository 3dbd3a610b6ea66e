"""Searches over several owners or switches, a key prefix, or every key a token reaches,
against an oracle that reads every shard's day tables of those keys directly and sorts by the
documented order (ts, shard, owner id, id) in one place.

Each module run has two fresh tenants: what a search without keys covers is exactly theirs.
The keys of one tenant are mapped to one group, and each of its switches gets the same flows
at few distinct times, so that rows of several owners tie on (ts, shard) and their ids repeat:
the order needs the owner to be total."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import orjson
import pytest
from fastapi.testclient import TestClient

from bench.shard_view import ordered_rows, owner_id
from router import clock
from router.app import create_app
from router.auth.scopes import DATA_SCOPES
from router.routing import search_plan
from router.settings import Settings
from tests.integration.test_search import cursor_position
from tests.integration.test_search_consistent import Writer, page_through
from tests.support import bearer, issue_token

# Two days back, as in test_search.py: every row of the window lies in the past.
DAY = clock.now().replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=2)
WINDOW = {"from": DAY.isoformat(), "to": (DAY + timedelta(days=2)).isoformat()}
TIMES = [timedelta(hours=3, seconds=s) for s in range(3)] + [timedelta(hours=26)]
PEERS = ["10.1.2.3", "10.1.2.4", "192.0.2.9"]
AUDIT_COLUMNS = "content"
FLOW_COLUMNS = "host(src_ip), host(dst_ip), src_port, dst_port"


@dataclass
class Tenant:
    name: str
    client: httpx.Client
    token: str
    switches: dict[str, int]  # key -> catalog id
    owners: dict[str, int]


@dataclass
class World:
    stem: str  # every key of the module starts with it
    one: Tenant
    two: Tenant


def _post(client: httpx.Client, path: str, records: list[dict[str, Any]]) -> None:
    body = b"".join(orjson.dumps(r) + b"\n" for r in records)
    response = client.post(path, content=body, headers={"content-type": "application/x-ndjson"})
    assert response.status_code == 200, response.text


def _flows(switch: str) -> list[dict[str, Any]]:
    """The same flows for every switch: equal times and, table by table, equal ids."""
    return [
        {
            "switch": switch,
            "src_ip": PEERS[n % 3],
            "dst_ip": PEERS[(n + 1) % 3],
            "src_port": 40000 + n,
            "dst_port": 443,
            "proto": 6,
            "bytes": 10,
            "ts": (DAY + TIMES[n % len(TIMES)]).isoformat(),
        }
        for n in range(48)
    ]


def _audit(owner: str) -> list[dict[str, Any]]:
    return [
        {
            "owner": owner,
            "ts": (DAY + TIMES[n % len(TIMES)]).isoformat(),
            "content": f"{'abc' if n % 2 else 'xyz'} {owner} #{n}",
        }
        for n in range(40)
    ]


def _tenant(api, settings, router_process, name, group, switches, owners) -> Tenant:
    token = issue_token(settings, name, DATA_SCOPES, name="tests: search over many keys")
    client = httpx.Client(base_url=router_process.url, timeout=60, headers=bearer(token))
    for kind, keys in (("flow", switches), ("audit", owners)):
        for key in keys:
            body = {"kind": kind, "key": key, "group": group, "tenant": name}
            assert api.put("/v1/admin/owners", json=body).status_code == 200
    for number in range(3):  # several requests: audit rows land on several shards
        _post(client, "/v1/audit", [r for o in owners for r in _audit(o)][number::3])
    if switches:
        _post(client, "/v1/flows", [f for s in switches for f in _flows(s)])
    return Tenant(
        name,
        client,
        token,
        {s: owner_id(api, "flow", s) for s in switches},
        {o: owner_id(api, "audit", o) for o in owners},
    )


@pytest.fixture(scope="module")
def world(api, settings, router_process) -> Iterator[World]:
    stem = f"many-{uuid.uuid4().hex[:8]}-"
    shards = api.get("/v1/admin/shards").json()
    group = next(s["group"] for s in shards if s["name"] == "shard01")
    one = _tenant(
        api,
        settings,
        router_process,
        f"many-a-{stem[5:13]}",
        group,
        [f"{stem}core-1", f"{stem}core-2", f"{stem}edge_1", f"{stem}edgex1", f"{stem}a%b"],
        [f"{stem}app-1", f"{stem}app-2", f"{stem}db"],
    )
    two = _tenant(
        api,
        settings,
        router_process,
        f"many-b-{stem[5:13]}",
        group,
        [f"{stem}core-9"],
        [f"{stem}app-9"],
    )
    try:
        yield World(stem, one, two)
    finally:
        one.client.close()
        two.client.close()


def oracle(api, kind: str, keys: dict[str, int], columns: str) -> list[list[Any]]:
    """Every row of ``keys`` (key -> owner id) on every shard: [ts, shard, owner id, id, key,
    *columns], sorted by (ts, shard, owner id, id)."""
    key_of = {ident: key for key, ident in keys.items()}
    rows = ordered_rows(api, kind, list(key_of), columns)
    return [[*row[:4], key_of[row[2]], *row[4:]] for row in rows]


def item_key(item: dict[str, Any], ids: dict[str, int]) -> tuple[str, str, int, int]:
    ts = datetime.fromisoformat(item.get("ts") or item["first_seen"]).astimezone(UTC)
    key = item.get("owner") or item["switch"]
    return (ts.strftime("%Y-%m-%d %H:%M:%S.%f"), item["shard"], ids[key], item["id"])


def expected_keys(rows: list[list[Any]]) -> list[tuple[str, str, int, int]]:
    return [(r[0], r[1], r[2], r[3]) for r in rows]


def pages(client, path: str, params: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    """Every page forward from the first."""
    found, cursor = [], None
    while True:
        extra = {"cursor": cursor} if cursor else {}
        response = client.get(path, params={**params, "limit": limit, **extra})
        assert response.status_code == 200, response.text
        found.append(response.json())
        cursor = found[-1]["next_cursor"]
        if cursor is None:
            return found


def back_from_the_end(client, path: str, params: dict[str, Any], last: dict[str, Any], limit: int):
    """The pages walked back with prev cursors from ``last``, in forward order."""
    found, cursor = [last], last["prev_cursor"]
    while cursor:
        response = client.get(path, params={**params, "limit": limit, "cursor": cursor})
        assert response.status_code == 200, response.text
        found.insert(0, response.json())
        cursor = found[0]["prev_cursor"]
    return found


def flat(found: list[dict[str, Any]], ids: dict[str, int]) -> list[tuple[str, str, int, int]]:
    return [item_key(item, ids) for page in found for item in page["items"]]


# The selections compared with the oracle: (kind, parameters, which keys of tenant one).
SELECTIONS = {
    "flows: two switches": ("flow", lambda s: {"switch": [f"{s}core-2", f"{s}core-1"]}, "core-"),
    "flows: every switch": ("flow", lambda s: {}, ""),
    "flows: a prefix": ("flow", lambda s: {"switch_prefix": f"{s}core-"}, "core-"),
    "flows: a prefix and a switch": (
        "flow",
        lambda s: {"switch_prefix": f"{s}edge", "switch": f"{s}a%b"},
        ("edge", "a%b"),
    ),
    "audit: two owners": ("audit", lambda s: {"owner": [f"{s}app-1", f"{s}db"]}, ("app-1", "db")),
    "audit: every owner": ("audit", lambda s: {}, ""),
    "audit: a prefix": ("audit", lambda s: {"owner_prefix": f"{s}app-"}, "app-"),
}


def selected(world: World, kind: str, which: str | tuple[str, ...]) -> dict[str, int]:
    keys = world.one.switches if kind == "flow" else world.one.owners
    starts = (which,) if isinstance(which, str) else which
    return {k: i for k, i in keys.items() if k.startswith(tuple(world.stem + s for s in starts))}


def path_of(kind: str, what: str = "search") -> str:
    return f"/v1/{'flows' if kind == 'flow' else 'audit'}/{what}"


def columns_of(kind: str) -> str:
    return FLOW_COLUMNS if kind == "flow" else AUDIT_COLUMNS


@pytest.mark.parametrize("name", list(SELECTIONS))
@pytest.mark.parametrize(("limit", "order"), [(7, "asc"), (11, "desc"), (1000, "asc")])
def test_pages_both_ways_and_counts_equal_the_oracle(api, world, name, limit, order) -> None:
    kind, params_of, which = SELECTIONS[name]
    keys = selected(world, kind, which)
    expected = expected_keys(oracle(api, kind, keys, columns_of(kind)))
    assert len(keys) >= 2 and expected
    if order == "desc":
        expected.reverse()
    params = {**params_of(world.stem), **WINDOW, "order": order, "count": "exact"}
    client = world.one.client
    forward = pages(client, path_of(kind), params, limit)
    assert flat(forward, keys) == expected
    assert forward[0]["count"] == {
        "value": len(expected),
        "exact": True,
        "method": "count",
        "bounds": None,
    }
    assert all(not page["partial"] for page in forward)
    back = back_from_the_end(client, path_of(kind), params, forward[-1], limit)
    assert [flat([p], keys) for p in back] == [flat([p], keys) for p in forward]


def test_rows_of_several_owners_tie_on_time_shard_and_id(api, world) -> None:
    """The data set holds the case the owner id breaks: equal (ts, shard, id) of two owners."""
    keys = selected(world, "flow", "core-")
    rows = expected_keys(oracle(api, "flow", keys, FLOW_COLUMNS))
    without_owner = [(ts, shard, ident) for ts, shard, _, ident in rows]
    assert len(set(without_owner)) < len(without_owner)


@pytest.mark.parametrize("name", list(SELECTIONS))
def test_export_equals_the_pages_and_the_oracle(api, world, name) -> None:
    kind, params_of, which = SELECTIONS[name]
    keys = selected(world, kind, which)
    expected = expected_keys(oracle(api, kind, keys, columns_of(kind)))
    params = {**params_of(world.stem), **WINDOW}
    response = world.one.client.get(path_of(kind, "export"), params=params)
    assert response.status_code == 200, response.text
    exported = [orjson.loads(line) for line in response.content.splitlines()]
    assert [item_key(item, keys) for item in exported] == expected
    paged = [
        item for page in pages(world.one.client, path_of(kind), params, 9) for item in page["items"]
    ]
    assert exported == paged


@pytest.mark.parametrize("name", list(SELECTIONS))
@pytest.mark.parametrize("order", ["asc", "desc"])
def test_fdw_pages_and_counts_equal_fanout(world, name, order) -> None:
    kind, params_of, _ = SELECTIONS[name]
    params = {**params_of(world.stem), **WINDOW, "order": order, "count": "exact"}
    client = world.one.client
    fanout = pages(client, path_of(kind), {**params, "backend": "fanout"}, 13)
    fdw = pages(client, path_of(kind), {**params, "backend": "fdw"}, 13)
    assert [p["items"] for p in fdw] == [p["items"] for p in fanout]
    # Compared by what they point at: a cursor also carries its issue time.
    assert [cursor_position(p["next_cursor"]) for p in fdw] == [
        cursor_position(p["next_cursor"]) for p in fanout
    ]
    assert fdw[0]["count"] == fanout[0]["count"]


def test_where_did_an_address_talk_to_anywhere_in_the_network(api, world) -> None:
    """The example of docs/api.md: one address, either direction, every switch."""
    keys = world.one.switches
    rows = oracle(api, "flow", keys, FLOW_COLUMNS)
    expected = expected_keys([r for r in rows if "10.1.2.3" in (r[5], r[6])])
    assert expected and len({r[4] for r in rows if "10.1.2.3" in (r[5], r[6])}) == len(keys)
    params = {**WINDOW, "src_ip": "10.1.2.3", "either_direction": "true", "count": "exact"}
    found = pages(world.one.client, "/v1/flows/search", params, 10)
    assert flat(found, keys) == expected
    assert found[0]["count"]["value"] == len(expected)


def test_a_prefix_is_text_not_a_pattern(world) -> None:
    """'_' and '%' in a prefix are characters, not LIKE wildcards."""
    client, stem = world.one.client, world.stem
    for prefix, switches in (
        (f"{stem}edge_", {f"{stem}edge_1"}),
        (f"{stem}a%", {f"{stem}a%b"}),
        (f"{stem}%", set()),
        (f"{stem}_", set()),
    ):
        items = pages(client, "/v1/flows/search", {**WINDOW, "switch_prefix": prefix}, 1000)
        assert {i["switch"] for p in items for i in p["items"]} == switches, prefix


def test_unknown_keys_in_a_list_add_no_rows(world) -> None:
    client, stem = world.one.client, world.stem
    nobody = f"{stem}nobody-{uuid.uuid4().hex}"
    for path, field, key in (
        ("/v1/flows/search", "switch", f"{stem}core-1"),
        ("/v1/audit/search", "owner", f"{stem}db"),
    ):
        alone = client.get(path, params={**WINDOW, field: key, "count": "exact", "limit": 1000})
        both = client.get(
            path, params={**WINDOW, field: [nobody, key], "count": "exact", "limit": 1000}
        )
        assert both.status_code == 200, both.text
        assert both.json()["items"] == alone.json()["items"] and alone.json()["items"]
        assert both.json()["count"] == alone.json()["count"]
        only_unknown = client.get(path, params={**WINDOW, field: nobody, "count": "exact"})
        assert only_unknown.json()["items"] == []
        assert only_unknown.json()["count"] == {
            "value": 0,
            "exact": True,
            "method": "count",
            "bounds": None,
        }


def test_each_tenant_sees_its_own_keys_only(world) -> None:
    """Both tenants have keys that start with the module's stem; without keys or with the stem
    as prefix each token covers its own tenant's, and naming the other's is a 403."""
    for me, other in ((world.one, world.two), (world.two, world.one)):
        for path, field, mine, theirs in (
            ("/v1/flows/search", "switch", me.switches, other.switches),
            ("/v1/audit/search", "owner", me.owners, other.owners),
        ):
            for params in ({}, {f"{field}_prefix": world.stem}):
                found = pages(me.client, path, {**WINDOW, **params}, 1000)
                assert {i[field] for p in found for i in p["items"]} == set(mine)
            refused = me.client.get(path, params={**WINDOW, field: [next(iter(theirs))]})
            assert refused.status_code == 403, refused.text
            assert refused.json()["error"]["field"] == field


def test_cursors_are_bound_to_the_set_of_keys_and_to_the_tenant(world) -> None:
    client, stem = world.one.client, world.stem
    two = {"switch": [f"{stem}core-1", f"{stem}core-2"], **WINDOW, "limit": 5}
    cursor = client.get("/v1/flows/search", params=two).json()["next_cursor"]
    assert cursor
    swapped = {**two, "switch": [f"{stem}core-2", f"{stem}core-1", f"{stem}core-1"]}
    assert client.get("/v1/flows/search", params={**swapped, "cursor": cursor}).status_code == 200
    for other in (
        {**two, "switch": f"{stem}core-1"},
        {**two, "switch_prefix": f"{stem}core-"},
        {**WINDOW, "limit": 5},
    ):
        response = client.get("/v1/flows/search", params={**other, "cursor": cursor})
        assert (response.status_code, response.json()["error"]["field"]) == (400, "cursor")
    everything = {**WINDOW, "limit": 5}
    cursor = client.get("/v1/flows/search", params=everything).json()["next_cursor"]
    response = world.two.client.get("/v1/flows/search", params={**everything, "cursor": cursor})
    assert (response.status_code, response.json()["error"]["field"]) == (400, "cursor")


@pytest.mark.parametrize(
    ("path", "params", "status", "field"),
    [
        ("/v1/audit/search", {"owner": [f"o-{n}" for n in range(101)]}, 400, "owner"),
        ("/v1/flows/search", {"switch": [f"s-{n}" for n in range(101)]}, 400, "switch"),
        ("/v1/flows/export", {"switch": [f"s-{n}" for n in range(101)]}, 400, "switch"),
        ("/v1/audit/search", {"owner_prefix": ""}, 422, "owner_prefix"),
        ("/v1/flows/search", {"switch_prefix": ""}, 422, "switch_prefix"),
        ("/v1/flows/search", {"switch_prefix": "a\x00b"}, 422, "switch_prefix"),
        ("/v1/flows/search", {"switch": ["ok", "a\x00b"]}, 422, "switch"),
        ("/v1/audit/export", {"owner_prefix": "x" * 257}, 422, "owner_prefix"),
        ("/v1/flows/search", {"switch_prefix": "tab\tbed"}, 400, "switch_prefix"),
        ("/v1/audit/search", {"owner": ["fine", "bell\x07"]}, 400, "owner"),
        ("/v1/audit/search", {"owner": ["x" * 257]}, 400, "owner"),
    ],
)
def test_bad_keys_name_the_parameter(world, path, params, status, field) -> None:
    response = world.one.client.get(path, params={**WINDOW, **params})
    assert response.status_code == status, response.text
    assert response.json()["error"]["field"] == field


def _narrow_router(settings: Settings, token: str, **search: Any) -> TestClient:
    narrow = settings.model_copy(update={"search": settings.search.model_copy(update=search)})
    return TestClient(create_app(narrow), headers=bearer(token))


def test_too_many_keys_covered_is_a_400_naming_what_to_narrow(settings, world) -> None:
    with _narrow_router(settings, world.one.token, max_matched_owners=2) as client:
        for params, field in (
            ({}, "switch"),
            ({"switch_prefix": world.stem}, "switch_prefix"),
        ):
            response = client.get("/v1/flows/search", params={**WINDOW, **params})
            assert (response.status_code, response.json()["error"]["field"]) == (400, field)
            assert "SHARDLOG_SEARCH__MAX_MATCHED_OWNERS" in response.json()["error"]["message"]
        # Two cores are within the limit, and named keys do not count against it.
        prefix = {"switch_prefix": f"{world.stem}core-", **WINDOW}
        assert client.get("/v1/flows/search", params=prefix).status_code == 200
        named = {"switch": list(world.one.switches), **WINDOW}
        assert client.get("/v1/flows/search", params=named).status_code == 200


def test_fdw_reads_at_most_max_owners_keys(settings, world) -> None:
    with _narrow_router(settings, world.one.token, max_owners=2) as client:
        response = client.get("/v1/audit/search", params={**WINDOW, "backend": "fdw"})
        assert (response.status_code, response.json()["error"]["field"]) == (400, "backend")
        assert "backend=fanout" in response.json()["error"]["message"]
        fanout = client.get("/v1/audit/search", params=WINDOW)
        assert fanout.status_code == 200 and fanout.json()["items"]


def test_one_statement_per_table_pages_the_same(api, settings, world, monkeypatch) -> None:
    """With a batch of one day table per statement, a shard's answer is merged from several
    statements, and exports read keyset pages: the pages, counts, estimates and exports stay
    those of the oracle."""
    monkeypatch.setattr(search_plan, "TABLES_PER_STATEMENT", 1)
    keys = world.one.switches
    expected = expected_keys(oracle(api, "flow", keys, FLOW_COLUMNS))
    with _narrow_router(settings, world.one.token, export_page_rows=7) as client:
        for order in ("asc", "desc"):
            response = client.get("/v1/flows/export", params={**WINDOW, "order": order})
            assert response.status_code == 200, response.text
            exported = [item_key(orjson.loads(line), keys) for line in response.iter_lines()]
            assert exported == (expected if order == "asc" else expected[::-1])
        for order, limit in (("asc", 7), ("desc", 50)):
            params = {**WINDOW, "order": order, "count": "exact"}
            found = pages(client, "/v1/flows/search", params, limit)
            assert flat(found, keys) == (expected if order == "asc" else expected[::-1])
            assert found[0]["count"]["value"] == len(expected)
            back = back_from_the_end(client, "/v1/flows/search", params, found[-1], limit)
            assert flat(back, keys) == flat(found, keys)
        estimate = client.get("/v1/flows/search", params={**WINDOW, "count": "estimate"})
        assert estimate.json()["count"]["value"] > 0


def _group_of_shard01(api) -> str:
    return str(
        next(s["group"] for s in api.get("/v1/admin/shards").json() if s["name"] == "shard01")
    )


@pytest.mark.parametrize("tables_per_statement", [None, 1])
@pytest.mark.parametrize("selection", ["every owner", "two owners"])
def test_consistent_pages_over_several_owners_keep_to_the_first_page(
    api, settings, router_process, monkeypatch, selection, tables_per_statement
) -> None:
    """consistent=true over two owners (named, or every owner the token reaches) while a writer
    adds rows between the pages to both of them and to a third owner of the tenant that had no
    rows at the first page: every page, forward and back, keeps to the first page's snapshots
    of its shards (also when a shard's tables are read by one statement each)."""
    if tables_per_statement is not None:
        monkeypatch.setattr(search_plan, "TABLES_PER_STATEMENT", tables_per_statement)
    name = f"many-c-{uuid.uuid4().hex[:8]}"
    owners = [f"{name}-app-1", f"{name}-app-2"]
    tenant = _tenant(api, settings, router_process, name, _group_of_shard01(api), [], owners)
    newcomer = f"{name}-late"
    expected = expected_keys(oracle(api, "audit", tenant.owners, AUDIT_COLUMNS))
    assert len({shard for _, shard, _, _ in expected}) >= 2
    params = {**WINDOW, "consistent": "true"}
    if selection == "two owners":
        params["owner"] = owners

    def late(n: int) -> list[dict[str, Any]]:
        return [
            {**row, "content": f"late-{n} {row['owner']}"}
            for key in (*owners, newcomer)
            for row in _audit(key)[n % 4 :: 13]
        ]

    try:
        with (
            _narrow_router(settings, tenant.token) as client,
            Writer(tenant.client, "/v1/audit", late) as writer,
        ):
            forward, backward = page_through(client, "/v1/audit/search", params, 7, writer)
        assert writer.batches >= 20
        shown = forward + backward
        assert not [i for i in shown if i["content"].startswith("late-")]
        assert [item_key(i, tenant.owners) for i in forward] == expected
        assert [item_key(i, tenant.owners) for i in backward] == expected
        # The writer's rows are there for a live search, the newcomer's among them when no key
        # is named: the consistent pages did cover an owner whose rows came after the first.
        live = pages(tenant.client, "/v1/audit/search", {**params, "consistent": "false"}, 1000)
        contents = [i["content"] for p in live for i in p["items"]]
        assert sum(c.startswith("late-") for c in contents) >= writer.batches
        assert any(newcomer in c for c in contents) == (selection == "every owner")
    finally:
        tenant.client.close()


@pytest.mark.parametrize("kind", ["flow", "audit"])
def test_refs_of_a_page_of_several_owners_each_fetch_their_own_row(api, world, kind) -> None:
    """A page without keys holds rows of every owner of the tenant, some tied on (ts, shard,
    id): each item's ref reads back exactly that item, of its own owner; the export's items
    carry the same refs."""
    keys = world.one.switches if kind == "flow" else world.one.owners
    client = world.one.client
    found = pages(client, path_of(kind), WINDOW, 1000)
    items = [item for page in found for item in page["items"]]
    field = "switch" if kind == "flow" else "owner"
    assert {item[field] for item in items} == set(keys)
    assert len({item["ref"] for item in items}) == len(items)
    without_owner = [(i["shard"], i["id"], i.get("ts") or i["first_seen"]) for i in items]
    assert len(set(without_owner)) < len(without_owner)  # the ties are in the set
    rows = "flows" if kind == "flow" else "audit"
    for item in items:
        response = client.get(f"/v1/{rows}/rows/{item['ref']}")
        assert response.status_code == 200, response.text
        assert response.json() == item
    exported = client.get(path_of(kind, "export"), params=WINDOW)
    assert exported.status_code == 200, exported.text
    assert [orjson.loads(line)["ref"] for line in exported.content.splitlines()] == [
        item["ref"] for item in items
    ]
