"""Reports against the real cluster, checked against a brute-force GROUP BY over one instance
holding the same stored rows (copied there from every shard): counts, sums, min/max and top-N
exactly, distinct counts within the sketches' bound; the fdw path equal to fan-out."""

from __future__ import annotations

import csv
import io
import ipaddress
import random
import subprocess
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import hypothesis
import orjson
import pytest
from fastapi.testclient import TestClient
from hypothesis import strategies as st

from bench.shard_view import catalog_shards, day_tables, owner_id, shard_sql
from router import clock
from router.app import create_app
from router.reports import hll
from router.settings import ReportSettings
from tests.support import bearer, run_cli

# Two days back: rows up to 47 h after DAY are in the past at any time of day (one day back
# put rows of "tomorrow" in the future in the early hours UTC, refused as such).
DAY = clock.now().replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=2)
FROM, TO = DAY.isoformat(), (DAY + timedelta(days=2)).isoformat()
FLOW_COLUMNS = (
    "src_ip, dst_ip, src_port, dst_port, ip_version, proto, bytes, packets, flow_count, "
    "first_seen, last_seen"
)
METRICS = [
    "rows",
    "flows",
    "bytes",
    "packets",
    "distinct(src_ip)",
    "distinct(dst_ip)",
    "min(first_seen)",
    "max(last_seen)",
]
# Each group key as the brute force computes it, and the column it answers under.
ORACLE_KEYS = {
    "bucket": "date_bin('1 hour', first_seen, TIMESTAMPTZ '2000-01-01 00:00:00+00')",
    "switch": "switch",
    "src_ip": "host(src_ip)",
    "dst_ip": "host(dst_ip)",
    "src_ip/24": "CASE WHEN family(src_ip) = 4 THEN network(set_masklen(src_ip, 24))::text "
    "ELSE network(set_masklen(src_ip, 24))::text END",
    "dst_ip/64": "CASE WHEN family(dst_ip) = 4 THEN host(dst_ip) "
    "ELSE network(set_masklen(dst_ip, 64))::text END",
    "src_port": "src_port",
    "dst_port": "dst_port",
    "proto": "proto",
    "ip_version": "ip_version",
}
ORACLE_METRICS = {
    "rows": "count(*)",
    "flows": "sum(flow_count)",
    "bytes": "sum(bytes)",
    "packets": "sum(packets)",
    "distinct(src_ip)": "count(DISTINCT src_ip)",
    "distinct(dst_ip)": "count(DISTINCT dst_ip)",
    "min(first_seen)": "min(first_seen)",
    "max(last_seen)": "max(last_seen)",
}
SOURCES = [f"10.{a}.{b}.{c}" for a in (1, 2) for b in (0, 7) for c in range(1, 40)] + [
    f"2001:db8:{a}::{c:x}" for a in (0, 1) for c in range(1, 30)
]


def psql_script(dsn: str, script: str) -> str:
    result = subprocess.run(
        ["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-f", "-"],
        input=script,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return result.stdout


@pytest.fixture(scope="module")
def switches(api) -> list[str]:
    names = [f"report-sw-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    rng = random.Random(14)
    for index, switch in enumerate(names):
        flows = []
        for n in range(400):
            src = rng.choice(SOURCES)
            v6 = ":" in src
            flows.append(
                {
                    "switch": switch,
                    "src_ip": src,
                    "dst_ip": f"2001:db8:ff:{n % 3}::{n % 11 + 1}"
                    if v6
                    else f"192.0.{n % 3}.{n % 13}",
                    "src_port": rng.choice([53, 443, 1500, 40000 + n]),
                    "dst_port": rng.choice([22, 53, 443, 8080]),
                    "proto": rng.choice([6, 17]),
                    "bytes": rng.randint(1, 10**6),
                    "packets": rng.randint(1, 900),
                    "ts": (DAY + timedelta(minutes=7 * n + index, seconds=n % 60)).isoformat(),
                }
            )
        response = api.post(
            "/v1/flows",
            content=b"".join(orjson.dumps(f) + b"\n" for f in flows),
            headers={"content-type": "application/x-ndjson"},
        )
        assert response.status_code == 200, response.text
    return names


@pytest.fixture(scope="module")
def oracle(api, switches):
    """A table on one instance holding every stored flow of the switches, and a function that
    runs a brute-force query over it."""
    shards = catalog_shards(api)
    lines = []
    for switch in switches:
        for shard, tables in day_tables(api, "flow", owner_id(api, "flow", switch)).items():
            for table in tables:
                lines += shard_sql(
                    shards[shard],
                    f"COPY (SELECT '{switch}', {FLOW_COLUMNS} FROM {table}) TO STDOUT",
                ).splitlines()
    dsn = next(iter(shards.values()))
    name = f"report_oracle_{uuid.uuid4().hex[:8]}"
    psql_script(
        dsn,
        f"CREATE TABLE {name} (switch text, src_ip inet, dst_ip inet, src_port int, "
        "dst_port int, ip_version smallint, proto smallint, bytes bigint, packets bigint, "
        "flow_count bigint, first_seen timestamptz, last_seen timestamptz);\n"
        f"COPY {name} FROM STDIN;\n" + "\n".join(lines) + "\n\\.\n",
    )

    def run(group_by: list[str], metrics: list[str], where: str = "true") -> list[dict]:
        keys = [f'{ORACLE_KEYS[k]} AS "{k}"' for k in group_by]
        values = [f'{ORACLE_METRICS[m]} AS "{m}"' for m in metrics]
        grouping = f"GROUP BY {', '.join(str(n + 1) for n in range(len(keys)))}" if keys else ""
        text = psql_script(
            dsn,
            "SET TIME ZONE 'UTC';\n"
            f"SELECT coalesce(json_agg(g), '[]') FROM (SELECT {', '.join(keys + values)} "
            f"FROM {name} WHERE {where} {grouping}) AS g;",
        )
        return orjson.loads(text)

    yield run
    shard_sql(dsn, f"DROP TABLE {name}")


def normal(value: Any) -> Any:
    if isinstance(value, str) and len(value) > 18 and value[4] == "-" and "T" in value:
        return datetime.fromisoformat(value).astimezone(UTC)
    return value


def key_of(row: dict, group_by: list[str]) -> tuple:
    return tuple(normal(row[k]) for k in group_by)


def assert_same(got: list[dict], expected: list[dict], group_by: list[str], metrics: list[str]):
    by_key = {key_of(r, group_by): r for r in expected}
    assert sorted(key_of(r, group_by) for r in got) == sorted(by_key)
    bound = 4 * hll.RELATIVE_STANDARD_ERROR
    for row in got:
        truth = by_key[key_of(row, group_by)]
        for metric in metrics:
            if metric.startswith("distinct"):
                assert abs(row[metric] - truth[metric]) <= max(1, bound * truth[metric]), metric
            else:
                assert normal(row[metric]) == normal(truth[metric]), metric


def report(api, **params: Any) -> dict:
    response = api.get("/v1/flows/report", params={"from": FROM, "to": TO, **params})
    assert response.status_code == 200, response.text
    return response.json()


GROUPINGS = [[], *([k] for k in ORACLE_KEYS), ["switch", "bucket"], ["src_ip/24", "dst_port"]]


@pytest.mark.parametrize("group_by", GROUPINGS, ids=lambda g: "+".join(g) or "total")
def test_every_grouping_and_metric_equals_the_brute_force(api, switches, oracle, group_by):
    params: dict[str, Any] = {"switch": switches, "group_by": group_by, "metrics": METRICS}
    if "bucket" in group_by:
        params["bucket"] = "1h"
    answer = report(api, **params)
    assert answer["partial"] is False
    assert_same(answer["groups"], oracle(group_by, METRICS), group_by, METRICS)
    if group_by:  # groups come in key order without order_by: the merge's order
        assert len(answer["groups"]) == len(oracle(group_by, ["rows"]))


@pytest.mark.parametrize("group_by", [["src_ip"], ["src_ip/24", "dst_port"], ["dst_ip", "proto"]])
def test_merging_in_small_batches_changes_nothing(settings, api_token, api, switches, group_by):
    """Three partials per fetch: the merge's rounds cut every shard's stream many times over
    (the default fetch step holds this data in one batch). Groups come in address order."""
    params = {"switch": switches, "from": FROM, "to": TO, "group_by": group_by}
    params["metrics"] = ["rows", "bytes", "distinct(dst_ip)", "min(first_seen)"]
    small = settings.model_copy(update={"report": ReportSettings(fetch_rows=3)})
    with TestClient(create_app(small), headers=bearer(api_token)) as client:
        batched = client.get("/v1/flows/report", params=params)
    assert batched.status_code == 200, batched.text
    assert batched.json()["groups"] == report(api, **params)["groups"]
    first_key = group_by[0]
    addresses = [ipaddress.ip_network(g[first_key]) for g in batched.json()["groups"]]
    assert addresses == sorted(addresses, key=lambda n: (n.version, n))
    assert len(addresses) >= 20


@pytest.mark.parametrize("metric", ["rows", "bytes", "packets", "flows", "max(last_seen)"])
@pytest.mark.parametrize("order", ["desc", "asc"])
def test_top_n_is_exact(api, switches, oracle, metric, order) -> None:
    group_by = ["src_ip"]
    answer = report(
        api,
        switch=switches,
        group_by=group_by,
        metrics=[metric],
        order_by=metric,
        order=order,
        limit=10,
    )
    values = sorted(
        (normal(r[metric]) for r in oracle(group_by, [metric])), reverse=order == "desc"
    )
    assert [normal(r[metric]) for r in answer["groups"]] == values[:10]
    truth = {r["src_ip"]: normal(r[metric]) for r in oracle(group_by, [metric])}
    assert all(truth[r["src_ip"]] == normal(r[metric]) for r in answer["groups"])


def test_filters_apply_as_in_search(api, switches, oracle) -> None:
    answer = report(
        api,
        switch=switches,
        group_by=["dst_port"],
        metrics=["rows", "bytes"],
        src_ip="10.1.0.0/16",
        dst_port="22-443",
        proto=6,
    )
    expected = oracle(
        ["dst_port"],
        ["rows", "bytes"],
        "src_ip <<= '10.1.0.0/16' AND dst_port BETWEEN 22 AND 443 AND proto = 6",
    )
    assert_same(answer["groups"], expected, ["dst_port"], ["rows", "bytes"])


@pytest.mark.parametrize("group_by", [["src_ip"], ["bucket", "switch"], [], ["dst_ip/64", "proto"]])
def test_fdw_equals_fanout(api, switches, group_by) -> None:
    params: dict[str, Any] = {"switch": switches, "group_by": group_by, "metrics": METRICS}
    if "bucket" in group_by:
        params["bucket"] = "15m"
    fanout = report(api, **params, backend="fanout")
    fdw = report(api, **params, backend="fdw")
    assert fdw["groups"] == fanout["groups"]


@pytest.fixture
def report_router(settings, api_token):
    """A router in this process whose reports may hold 2 kB of groups before spilling."""
    tight = settings.model_copy(update={"report": ReportSettings(memory_budget_bytes=2_000)})
    with TestClient(create_app(tight), headers=bearer(api_token)) as client:
        yield client


def test_late_shards_make_the_answer_partial_or_504(settings, api_token, switches) -> None:
    hasty = settings.model_copy(update={"report": ReportSettings(shard_timeout_s=0.000001)})
    with TestClient(create_app(hasty), headers=bearer(api_token)) as client:
        params = {"switch": switches, "from": FROM, "to": TO, "group_by": "src_ip"}
        refused = client.get("/v1/flows/report", params={**params, "partial": "false"})
        assert refused.status_code == 504
        assert "SHARDLOG_REPORT__SHARD_TIMEOUT_S" in refused.json()["error"]["message"]
        answer = client.get("/v1/flows/report", params=params).json()
        assert answer["partial"] is True
        assert answer["failed_shards"] and all(f["shard"] for f in answer["failed_shards"])


def test_spill_path_gives_the_in_memory_order(api, switches, report_router) -> None:
    params = {
        "switch": switches,
        "from": FROM,
        "to": TO,
        "group_by": ["src_ip", "src_port"],
        "metrics": ["bytes", "rows"],
        "order_by": "bytes",
    }
    spilled = report_router.get("/v1/flows/report", params=params)
    assert spilled.status_code == 200, spilled.text
    in_memory = report(api, **{k: v for k, v in params.items() if k not in ("from", "to")})
    assert spilled.json()["spilled_runs"] > 1
    assert in_memory["spilled_runs"] == 0
    assert spilled.json()["groups"] == in_memory["groups"]
    bytes_ = [g["bytes"] for g in in_memory["groups"]]
    assert bytes_ == sorted(bytes_, reverse=True)


def test_ndjson_and_csv_carry_the_same_groups(api, switches) -> None:
    params = {
        "switch": switches,
        "from": FROM,
        "to": TO,
        "group_by": "dst_port,proto",
        "metrics": "rows,bytes",
    }
    groups = report(api, **{k: v for k, v in params.items() if k not in ("from", "to")})["groups"]
    lines = api.get("/v1/flows/report", params={**params, "format": "ndjson"})
    assert lines.headers["x-shardlog-partial"] == "false"
    assert [orjson.loads(line) for line in lines.text.splitlines()] == groups
    table = api.get("/v1/flows/report", params={**params, "format": "csv"})
    rows = list(csv.DictReader(io.StringIO(table.text)))
    assert [{k: str(v) for k, v in g.items()} for g in groups] == rows


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"group_by": "colour"}, "group_by"),
        ({"metrics": "median(bytes)"}, "metrics"),
        ({"order_by": "distinct(colour)"}, "order_by"),
        ({"group_by": "src_ip/129"}, "group_by"),
        ({"group_by": "src_ip/33", "ip_version": 4}, "group_by"),
        ({"group_by": "bucket"}, "bucket"),
        (
            {"group_by": "bucket", "bucket": "1m", "to": (DAY + timedelta(days=300)).isoformat()},
            "bucket",
        ),
        ({"to": (DAY + timedelta(days=401)).isoformat()}, "to"),
        ({"group_by": "owner"}, "group_by"),
    ],
)
def test_bad_input_names_the_parameter(api, switches, params, field) -> None:
    response = api.get(
        "/v1/flows/report", params={"switch": switches, "from": FROM, "to": TO, **params}
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["field"] == field


def test_unknown_switch_reports_nothing(api) -> None:
    answer = report(api, switch="report-nobody", metrics="rows,bytes,distinct(src_ip)")
    assert answer["groups"] == [{"rows": 0, "bytes": 0, "distinct(src_ip)": 0}]
    assert answer["exactness"]["metrics"]["distinct(src_ip)"]["exact"] is False


def test_audit_report_counts_per_owner_and_bucket(api) -> None:
    owners = [f"report-o-{uuid.uuid4().hex[:6]}" for _ in range(3)]
    records = [
        {
            "owner": owners[n % 3],
            "ts": (DAY + timedelta(minutes=17 * n)).isoformat(),
            "content": f"login {'failed' if n % 4 == 0 else 'ok'} {n}",
        }
        for n in range(120)
    ]
    response = api.post(
        "/v1/audit",
        content=b"".join(orjson.dumps(r) + b"\n" for r in records),
        headers={"content-type": "application/x-ndjson"},
    )
    assert response.status_code == 200, response.text
    answer = report_audit(api, owner=owners, group_by="owner,bucket", bucket="1d", q="failed")
    expected: dict[tuple, int] = {}
    for r in records:
        if "failed" in r["content"]:
            day = datetime.fromisoformat(r["ts"]).replace(hour=0, minute=0)
            expected[(r["owner"], day)] = expected.get((r["owner"], day), 0) + 1
    got = {(g["owner"], normal(g["bucket"])): g["rows"] for g in answer["groups"]}
    assert got == expected
    total = report_audit(api, owner=owners, metrics="rows,distinct(owner)")
    assert total["groups"] == [{"rows": 120, "distinct(owner)": 3}]


def report_audit(api, **params: Any) -> dict:
    response = api.get("/v1/audit/report", params={"from": FROM, "to": TO, **params})
    assert response.status_code == 200, response.text
    return response.json()


@hypothesis.settings(max_examples=25, deadline=None)
@hypothesis.given(
    sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=6), offset=st.integers(0, 10**6)
)
def test_the_python_union_of_sketches_equals_hll_union_agg(api, sizes, offset) -> None:
    """Sketches of overlapping ranges, built by PostgreSQL, unioned here: the estimate equals
    PostgreSQL's hll_cardinality(hll_union_agg(...)) of the same sketches."""
    dsn = next(iter(catalog_shards(api).values()))
    parts = " UNION ALL ".join(
        f"SELECT {n} AS part, hll_add_agg(hll_hash_text(g::text), {hll.SQL_PARAMETERS}) AS s "
        f"FROM generate_series({offset + n * 500}, {offset + n * 500 + size - 1}) AS g"
        for n, size in enumerate(sizes)
    )
    out = shard_sql(
        dsn,
        f"WITH p AS ({parts}) SELECT coalesce(s::text, '') FROM p UNION ALL "
        "SELECT coalesce(hll_cardinality(hll_union_agg(s)), 0)::text FROM p",
    ).splitlines()
    sketches, expected = out[:-1], float(out[-1])
    union = hll.empty()
    for text in sketches:
        union = union.union(hll.decode(text or None))
    assert union.cardinality() == pytest.approx(expected, rel=1e-12, abs=1e-9)


def test_the_cli_prints_a_table(settings, api_token, switches) -> None:
    def cli(*grouping: str) -> Any:
        window = ("--from", FROM, "--to", TO, "--token", api_token)
        return run_cli(settings, "report", "flows", *switches, *window, *grouping)

    printed = cli("--group-by", "proto", "--metrics", "rows,bytes")
    assert printed.returncode == 0, printed.stderr
    lines = printed.stdout.splitlines()
    assert lines[0].split() == ["PROTO", "ROWS", "BYTES"]
    assert {line.split()[0] for line in lines[1:]} == {"6", "17"}
    refused = cli("--group-by", "colour")
    assert refused.returncode == 1 and "400 (group_by)" in refused.stderr
