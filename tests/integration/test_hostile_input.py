"""Issue 11's reproducers, each against the real router process: hostile parameters and bodies
get a clear 4xx naming the field (never a 500), errors stay small, and cost stays linear."""

from __future__ import annotations

import socket
import statistics
import subprocess
import sys
import time
from datetime import timedelta

import httpx
import pytest

from router import clock
from tests.integration.test_ingest import audit_contents, flow_rows, new_key, post_audit
from tests.support import eventually

NOW = clock.now().replace(microsecond=0)
FROM = (NOW - timedelta(hours=1)).isoformat()
TO = (NOW + timedelta(hours=1)).isoformat()
NDJSON = {"content-type": "application/x-ndjson"}


def error_of(response: httpx.Response) -> tuple[int, str | None]:
    return response.status_code, response.json()["error"]["field"]


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("/v1/audit/search", {"owner": "a\x00b", "from": FROM, "to": TO}, "owner"),
        ("/v1/audit/export", {"owner": "a\x00b", "from": FROM, "to": TO}, "owner"),
        ("/v1/flows/search", {"switch": "s\x00", "from": FROM, "to": TO}, "switch"),
        ("/v1/flows/export", {"switch": "s", "from": FROM, "to": TO, "src_ip": "\x00"}, "src_ip"),
        ("/v1/admin/owners", {"kind": "audit", "key": "a\x00"}, "key"),
        ("/v1/audit/search", {"owner": "a", "from": FROM, "to": TO, "q": "x\x00"}, "q"),
    ],
)
def test_nul_in_a_parameter_is_422_naming_it(api, path, params, field) -> None:
    assert error_of(api.get(path, params=params)) == (422, field)


def test_nul_in_a_body_posted_as_query_parameter(api) -> None:
    response = api.post("/v1/flows", params={"switch": "a\x00"}, content=b"10.0.0.1,10.0.0.2,1,2")
    assert error_of(response) == (422, "switch")


@pytest.mark.parametrize("depth", [40, 254, 300, 1000])
def test_deeply_nested_attrs_are_422_naming_the_record(api, depth) -> None:
    attrs = "{" + '"k":{' * depth + "}" * depth + "}"
    line = '{"owner":"deep","content":"c","attrs":' + attrs + "}"
    response = api.post("/v1/audit", content=line, headers=NDJSON)
    assert error_of(response) == (422, "records[0].attrs")
    response = api.post("/v1/audit", content=f"[{line}]")
    assert error_of(response) == (422, "records[0].attrs")


def test_timestamps_out_of_range_or_not_rfc3339(api) -> None:
    owner = new_key("ts")
    for ts in ("0001-01-01T00:00:00+14:00", "2026-W47-1T00:00:00Z", "20261123T000000Z"):
        response = post_audit(api, [{"owner": owner, "content": "c", "ts": ts}])
        assert error_of(response) == (422, "records[0].ts"), ts
    params = {"owner": owner, "from": "0001-01-01T00:00:00+01:00", "to": TO}
    assert error_of(api.get("/v1/audit/search", params=params)) == (400, "from")
    params = {"owner": owner, "from": FROM, "to": "2026-W47-1T00:00:00Z"}
    assert error_of(api.get("/v1/audit/search", params=params)) == (400, "to")


def test_csv_field_over_the_csv_limit_is_422_and_the_connection_stays_usable(api) -> None:
    body = b'10.0.0.1,10.0.0.2,1,2,"' + b"9" * 200_000 + b'"\n'
    with httpx.Client(
        base_url=str(api.base_url),
        timeout=30,
        headers={"authorization": api.headers["authorization"]},
    ) as client:
        response = client.post(
            "/v1/flows?switch=sw", content=body, headers={"content-type": "text/csv"}
        )
        assert error_of(response)[0] == 422
        assert client.get("/health/live").status_code == 200


def test_ip_version_is_accepted_as_a_query_parameter(api) -> None:
    for version in ("4", "6"):
        params = {"switch": "any", "from": FROM, "to": TO, "ip_version": version}
        assert api.get("/v1/flows/search", params=params).status_code == 200
    params = {"switch": "any", "from": FROM, "to": TO, "ip_version": "5"}
    assert error_of(api.get("/v1/flows/search", params=params)) == (422, "ip_version")


def test_error_bodies_quote_little_of_a_huge_value(api) -> None:
    for size, expected in (
        (500_000, (422, "records[0].src_ip")),
        (10_000_000, (413, "records[0]")),
    ):
        record = {"switch": "s", "src_ip": "9" * size, "dst_ip": "10.0.0.1"}
        response = api.post("/v1/flows", json=[record | {"src_port": 1, "dst_port": 2}])
        assert error_of(response) == expected
        assert len(response.content) < 1000


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("src_port", "\u0661\u0662", "integer"),
        ("bytes", " 12 ", "integer"),
        ("src_port", -1, "between 0 and 65535"),
    ],
)
def test_strict_integers(api, field, value, words) -> None:
    record = {"switch": "s", "src_ip": "10.0.0.1", "dst_ip": "10.0.0.2", "src_port": 1}
    record |= {"dst_port": 2, field: value}
    response = api.post("/v1/flows", json=[record])
    assert error_of(response) == (422, f"records[0].{field}")
    assert words in response.json()["error"]["message"]


@pytest.mark.parametrize("key", ["a\u0085b", "a\u2028b", "a\tb"])
def test_one_rule_for_owner_keys_in_ingest_and_admin(api, key) -> None:
    assert error_of(post_audit(api, [{"owner": key, "content": "c"}]))[0] == 422
    response = api.put(
        "/v1/admin/owners",
        json={"kind": "audit", "key": key, "group": "group1", "tenant": "system"},
    )
    assert error_of(response) == (422, "key")


def test_csv_header_spellings_switch_column_and_derived_ip_type(api, cluster) -> None:
    first, second = new_key("csv-a"), new_key("csv-b")
    body = (
        f"Switch,Source Address,Destination Address,Source Port,Destination Port,Protocol,"
        f"Bytes,Packets\n{first},10.0.0.1,10.0.0.2,1000,443,TCP,1500,3\n"
        f"{second},2001:db8::1,2001:db8::2,53,5353,17,100,1\n"
        f",10.0.0.3,10.0.0.4,1,2,6,10,1\n"
    ).encode()
    response = api.post(
        "/v1/flows", params={"switch": first}, content=body, headers={"content-type": "text/csv"}
    )
    assert response.json() == {"accepted": 3}
    assert [r[:6] for r in flow_rows(api, cluster, first)] == [
        ["10.0.0.1", "10.0.0.2", "1000", "443", "6", "1500"],
        ["10.0.0.3", "10.0.0.4", "1", "2", "6", "10"],
    ]
    assert [r[-1] for r in flow_rows(api, cluster, second)] == ["6"]
    response = api.post(
        "/v1/flows",
        content=b"src_ip,dst_ip,src_port,dst_port,colour\n",
        headers={"content-type": "text/csv"},
    )
    assert error_of(response) == (422, "lines[1]")
    assert "colour" in response.json()["error"]["message"]


def _auth(api: httpx.Client) -> dict[str, str]:
    return {"authorization": api.headers["authorization"]}


def _raw_post(url: str, path: str, headers: dict[str, str], length: int) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    head = f"POST {path} HTTP/1.1\r\nhost: {host}\r\ncontent-length: {length}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    sock.sendall(head.encode() + b"\r\n")
    return sock


def _status_of(sock: socket.socket) -> int:
    answer = b""
    while b"\r\n" not in answer:
        chunk = sock.recv(65536)
        if not chunk:
            break
        answer += chunk
    return int(answer.split(b" ", 2)[1])


def test_a_line_without_end_is_refused_once_longer_than_any_record(api, router_process) -> None:
    """Announce 128 MiB, send 3 MiB of one line: the 413 arrives without the rest."""
    sock = _raw_post(router_process.url, "/v1/audit", {**NDJSON, **_auth(api)}, 128 * 2**20)
    started = time.monotonic()
    try:
        sock.sendall(b'{"owner":"o","content":"' + b"x" * (3 * 2**20))
        assert _status_of(sock) == 413
    finally:
        sock.close()
    assert time.monotonic() - started < 5


def test_a_client_leaving_mid_body_is_no_server_error(api, router_process) -> None:
    def disconnects() -> float:
        metrics = api.get("/metrics").text
        line = next(
            x for x in metrics.splitlines() if x.startswith("shardlog_client_disconnects_total")
        )
        return float(line.split()[-1])

    before = disconnects()
    sock = _raw_post(router_process.url, "/v1/audit", {**NDJSON, **_auth(api)}, 100_000)
    sock.sendall(b'{"owner":"gone","content":"c"}\n' * 10)
    sock.close()
    eventually(lambda: disconnects() > before)
    assert audit_contents(api, None, "gone") == []


# Run in a process of its own, at the lowest priority, so that building and sending the bodies
# takes no turns from the router or the probe on a machine of two cores: what is measured is the
# router's answer, not the load generator's share of the processors.
_POSTER = """
import os, sys, threading, httpx, orjson
os.nice(19)
url, megabytes, ts = sys.argv[1], int(sys.argv[2]), sys.argv[3]
auth = {"authorization": sys.stdin.readline().strip()}
record = orjson.dumps({"owner": "big", "ts": ts, "content": "y" * 480})
count = megabytes * 2**20 // (len(record) + 1)
body = b"[" + b",".join([record] * count) + b',{"owner":"big","content":5}]'
print("ready", flush=True)
sys.stdin.readline()
def post():
    with httpx.Client(base_url=url, timeout=120, headers=auth) as client:
        print(client.post("/v1/audit", content=body).status_code, flush=True)
posters = [threading.Thread(target=post) for _ in range(2)]
for poster in posters:
    poster.start()
for poster in posters:
    poster.join()
"""


def test_liveness_stays_fast_while_large_arrays_are_parsed(api, router_process) -> None:
    """Two 64 MiB JSON arrays at once (their last record invalid, so nothing is written, but
    every record is parsed and checked) while /health/live is asked every 20 ms."""
    poster = subprocess.Popen(
        [sys.executable, "-c", _POSTER, router_process.url, "64", NOW.isoformat()],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert poster.stdin is not None and poster.stdout is not None
    poster.stdin.write(api.headers["authorization"] + "\n")  # not in argv: ps shows argv
    poster.stdin.flush()
    assert poster.stdout.readline().strip() == "ready"
    latencies = []
    with httpx.Client(base_url=router_process.url, timeout=10) as probe:
        poster.stdin.write("go\n")
        poster.stdin.flush()
        while poster.poll() is None:
            started = time.perf_counter()
            assert probe.get("/health/live").status_code == 200
            latencies.append(time.perf_counter() - started)
            time.sleep(0.02)
    assert poster.stdout.read().split() == ["422", "422"]
    assert len(latencies) > 20
    p99 = statistics.quantiles(latencies, n=100, method="inclusive")[98]
    assert p99 < 0.1, f"p99 {p99 * 1000:.0f} ms over {len(latencies)} probes"


def test_nul_in_a_json_body_key_is_422(api) -> None:
    body = {"switch": "a\x00b", "from": "2026-11-20", "to": "2026-11-23"}
    body["flows"] = [{"src_ip": "10.0.0.1", "dst_ip": "10.0.0.2", "src_port": 1, "dst_port": 2}]
    response = api.request("DELETE", "/v1/flows", json=body)
    assert error_of(response) == (422, "switch")


def test_a_lone_carriage_return_inside_a_csv_line_is_422(api) -> None:
    response = api.post(
        "/v1/flows?switch=s",
        content=b"10.0.0.1,10.0.0.2,1,2,IPv4\rx\n",
        headers={"content-type": "text/csv"},
    )
    assert error_of(response)[0] == 422
