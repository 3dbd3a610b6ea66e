"""What flow exporters add to a flow (tcp_flags, sampling_rate, sampled, sampling_mixed), written
through the REST API, read back everywhere a flow row is read: search pages by fan-out and by
the fdw path, NDJSON and CSV exports, permalinks. Records that say nothing of them read as null
and false; records that say bad values are refused naming the field. The live tail's flow
events: tests/integration/test_tail.py."""

from __future__ import annotations

import csv
import io
import uuid
from datetime import timedelta
from typing import Any

import orjson
import pytest

from router.search import lines
from tests.integration.test_search import DAY, FROM, TO, post
from tests.support import run_cli

ADDED = ("tcp_flags", "sampling_rate", "sampled", "sampling_mixed")


def _flow(switch: str, n: int, **extra: Any) -> dict[str, Any]:
    return {
        "switch": switch,
        "ts": (DAY + timedelta(minutes=n)).isoformat(),
        "src_ip": f"10.7.0.{n}" if n % 2 else f"2001:db8::7:{n:x}",
        "dst_ip": "192.0.2.7" if n % 2 else "2001:db8::1",
        "src_port": 2000 + n,
        "dst_port": 443,
        "proto": 6,
        "bytes": 100 * (n + 1),
        "packets": n + 1,
        **extra,
    }


# Per flow n: the records written (tcp_flags, sampling_rate of each; None: left out) and what
# the stored flow then shows.
CASES: dict[int, tuple[list[tuple[int | None, int | None]], tuple[Any, ...]]] = {
    0: ([(None, None)], (None, None, False, False)),
    1: ([(0x02, None)], (0x02, None, False, False)),
    2: ([(None, 1)], (None, 1, False, False)),
    3: ([(0x12, 100)], (0x12, 100, True, False)),
    # Merged within one request and across two: flags OR-ed, the larger rate kept, a
    # difference in sampling marked (no rate counts as 1).
    4: ([(0x02, 10), (0x10, 10)], (0x12, 10, True, False)),
    5: ([(0x01, 1), (0x80, 1000)], (0x81, 1000, True, True)),
    6: ([(None, None), (255, 1)], (255, 1, False, False)),
    7: ([(None, 64), (None, None)], (None, 64, True, True)),
}


def _record(switch: str, n: int, flags: int | None, rate: int | None) -> dict[str, Any]:
    extra = {"tcp_flags": flags, "sampling_rate": rate}
    return _flow(switch, n, **{k: v for k, v in extra.items() if v is not None})


@pytest.fixture(scope="module")
def switch(api) -> str:
    name = f"cols-{uuid.uuid4().hex[:8]}"
    first = [_record(name, n, *records[0]) for n, (records, _) in CASES.items()]
    # Flow 4's second record in the same request (merged by the router), 5..7's in another
    # (merged by the shard).
    first.append(_record(name, 4, *CASES[4][0][1]))
    post(api, "/v1/flows", first)
    post(api, "/v1/flows", [_record(name, n, *CASES[n][0][1]) for n in (5, 6, 7)])
    return name


def _post(api, body: bytes, csv_of: str | None = None) -> Any:
    """NDJSON, or with ``csv_of`` CSV rows of that switch; the response whatever it is."""
    if csv_of is None:
        return api.post("/v1/flows", content=body, headers={"content-type": "application/x-ndjson"})
    headers = {"content-type": "text/csv"}
    return api.post("/v1/flows", params={"switch": csv_of}, content=body, headers=headers)


def _cell(value: Any) -> str:
    """A value as a CSV export writes it: null empty, booleans as JSON writes them."""
    return "" if value is None else str(value).lower()


def _items(api, switch: str, backend: str = "fanout") -> list[dict[str, Any]]:
    params = {"switch": switch, "from": FROM, "to": TO, "limit": 1000, "backend": backend}
    response = api.get("/v1/flows/search", params=params)
    assert response.status_code == 200, response.text
    return response.json()["items"]


def _by_port(items: list[dict[str, Any]]) -> dict[int, tuple[Any, ...]]:
    return {item["src_port"] - 2000: tuple(item[name] for name in ADDED) for item in items}


def test_search_shows_what_the_records_said(api, switch) -> None:
    items = _items(api, switch)
    assert _by_port(items) == {n: shown for n, (_, shown) in CASES.items()}
    assert {item["flow_count"] for item in items if item["src_port"] - 2000 >= 4} == {2}


def test_the_fdw_path_shows_the_same(api, switch) -> None:
    assert _items(api, switch, "fdw") == _items(api, switch)


def test_permalinks_show_the_same(api, switch) -> None:
    for item in _items(api, switch):
        response = api.get(f"/v1/flows/rows/{item['ref']}")
        assert response.status_code == 200, response.text
        assert response.json() == item


def test_ndjson_export_shows_the_same_in_the_items_order(api, switch) -> None:
    params = {"switch": switch, "from": FROM, "to": TO}
    response = api.get("/v1/flows/export", params=params)
    assert response.status_code == 200, response.text
    exported = [orjson.loads(line) for line in response.content.splitlines()]
    assert exported == _items(api, switch)
    assert [list(item) for item in exported] == [
        [*lines.FLOW_FIELDS, "shard", "switch", "ref"]
    ] * len(CASES)
    assert lines.FLOW_FIELDS[-5:] == ("last_seen", *ADDED)


def test_csv_export_shows_the_same(api, switch) -> None:
    params = {"switch": switch, "from": FROM, "to": TO, "format": "csv"}
    response = api.get("/v1/flows/export", params=params)
    assert response.status_code == 200, response.text
    assert response.text.splitlines()[0].endswith(",last_seen," + ",".join(ADDED))
    rows = list(csv.DictReader(io.StringIO(response.text)))
    cells = {int(row["src_port"]) - 2000: tuple(row[name] for name in ADDED) for row in rows}

    def cell(value: Any) -> str:
        return "" if value is None else str(value).lower()

    assert cells == {n: tuple(cell(v) for v in shown) for n, (_, shown) in CASES.items()}


def test_the_owner_export_shows_the_same(api, settings, switch) -> None:
    """shardlog owner export (retention's per-owner lifecycle): NDJSON as the items, and its
    exact CSV with the same cells as the API's CSV."""
    bounds = (
        "--from",
        DAY.date().isoformat(),
        "--to",
        (DAY + timedelta(days=1)).date().isoformat(),
    )
    ndjson = run_cli(settings, "owner", "export", switch, "--kind", "flow", *bounds)
    assert ndjson.returncode == 0, ndjson.stderr
    assert [orjson.loads(line) for line in ndjson.stdout.splitlines()] == _items(api, switch)
    exact = run_cli(
        settings, "owner", "export", switch, "--kind", "flow", *bounds, "--format", "csv"
    )
    assert exact.returncode == 0, exact.stderr
    rows = list(csv.DictReader(io.StringIO(exact.stdout)))
    assert list(rows[0])[-4:] == list(ADDED)
    cells = {int(r["src_port"]) - 2000: tuple(r[name] for name in ADDED) for r in rows}
    assert cells == {n: tuple(_cell(v) for v in shown) for n, (_, shown) in CASES.items()}


def test_csv_records_may_carry_flags_and_sampling(api) -> None:
    name = f"cols-csv-{uuid.uuid4().hex[:8]}"
    ts = (DAY + timedelta(hours=1)).isoformat()
    body = (
        "ts,src_ip,dst_ip,src_port,dst_port,proto,bytes,packets,TCP Flags,Sampling Rate\n"
        f"{ts},10.8.0.1,10.8.0.2,1,2,tcp,3000,3,27,10\n"
        f"{ts},10.8.0.3,10.8.0.4,3,4,udp,100,1,,\n"
    )
    response = _post(api, body.encode(), csv_of=name)
    assert response.status_code == 200, response.text
    shown = {item["src_ip"]: tuple(item[n] for n in ADDED) for item in _items(api, name)}
    assert shown == {"10.8.0.1": (27, 10, True, False), "10.8.0.3": (None, None, False, False)}
    bytes_of = {item["src_ip"]: item["bytes"] for item in _items(api, name)}
    assert bytes_of["10.8.0.1"] == 3000  # taken as already scaled: stored as given


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tcp_flags", 256),
        ("tcp_flags", -1),
        ("tcp_flags", "2"),
        ("tcp_flags", True),
        ("tcp_flags", 1.5),
        ("sampling_rate", 0),
        ("sampling_rate", 2**31),
        ("sampling_rate", "10"),
        ("sampling_rate", False),
    ],
)
def test_bad_flags_or_sampling_are_refused_naming_the_field(api, field, value) -> None:
    name = f"cols-bad-{uuid.uuid4().hex[:8]}"
    records = [_flow(name, 1), _flow(name, 2, **{field: value})]
    response = _post(api, b"".join(orjson.dumps(r) + b"\n" for r in records))
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == f"records[1].{field}"
    assert _items(api, name) == []


@pytest.mark.parametrize(
    ("column", "value", "field"),
    [
        ("tcp_flags", "256", "lines[3].tcp_flags"),
        ("tcp_flags", "SYN", "lines[3].tcp_flags"),
        ("sampling_rate", "0", "lines[3].sampling_rate"),
        ("sampling_rate", "1.5", "lines[3].sampling_rate"),
    ],
)
def test_bad_csv_flags_or_sampling_are_refused_naming_the_line(api, column, value, field) -> None:
    name = f"cols-bad-{uuid.uuid4().hex[:8]}"
    body = (
        f"src_ip,dst_ip,src_port,dst_port,{column}\n"
        "10.9.0.1,10.9.0.2,1,2,1\n"
        f"10.9.0.1,10.9.0.2,1,2,{value}\n"
    )
    response = _post(api, body.encode(), csv_of=name)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field
    assert _items(api, name) == []
