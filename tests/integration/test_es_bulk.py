"""Elasticsearch's bulk API against the session router, with the real clients: the Python
client 8.x (handshake, helpers.bulk, gzip) and rsyslog's omelasticsearch; per-item refusals
beside stored items, request-level errors in Elasticsearch's form with nothing stored, gzip
and a zip bomb, and a fuzzed parser that never answers 5xx nor stores a refused request."""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from elasticsearch import Elasticsearch, helpers
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from router import clock
from router.auth.scopes import AUDIT_READ, AUDIT_WRITE
from router.auth.store import TokenLimits
from router.settings import Settings
from services.process import free_port
from tests.support import bearer, clock_now, eventually, issue_token

NOW = clock.now().replace(microsecond=0)


def window() -> dict[str, str]:
    """From two days before the module's NOW (the rows' explicit times) to six hours after the
    search: rows the router stamps (no @timestamp) are in it however long the session ran."""
    return {
        "from": (NOW - timedelta(days=2)).isoformat(),
        "to": (clock_now() + timedelta(hours=6)).isoformat(),
    }


NDJSON = {"content-type": "application/x-ndjson"}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@dataclass
class Tenant:
    name: str
    token: str
    client: httpx.Client  # Bearer: writes and searches

    def rows(self, owner: str) -> list[dict[str, Any]]:
        page = self.client.get(
            "/v1/audit/search", params={"owner": owner, **window(), "limit": 1000}
        )
        assert page.status_code == 200, page.text
        return sorted(page.json()["items"], key=lambda row: (row["ts"], row["content"]))


@pytest.fixture(scope="module")
def tenant(router_process, settings: Settings) -> Iterator[Tenant]:
    name = unique("es")
    token = issue_token(settings, name, [AUDIT_WRITE, AUDIT_READ], name="es shipper")
    with httpx.Client(base_url=router_process.url, timeout=60, headers=bearer(token)) as client:
        yield Tenant(name, token, client)


def ndjson(*lines: dict[str, Any]) -> bytes:
    return b"".join(orjson.dumps(line) + b"\n" for line in lines)


def bulk(tenant: Tenant, body: bytes, path: str = "/_bulk", **headers: str) -> httpx.Response:
    return tenant.client.post(path, content=body, headers={**NDJSON, **headers})


def statuses(response: httpx.Response) -> list[int]:
    assert response.status_code == 200, response.text
    return [next(iter(item.values()))["status"] for item in response.json()["items"]]


def test_the_python_client_handshakes_and_writes_with_helpers_bulk(
    router_process, tenant: Tenant
) -> None:
    owner = unique("es-py")
    index = f"{owner}-{NOW:%Y.%m.%d}"
    es = Elasticsearch(router_process.url, basic_auth=("filebeat", tenant.token))
    info = es.info()
    assert info["version"]["number"].startswith("8.")
    assert info["tagline"] == "You Know, for Search"
    assert es.ping()
    docs = [
        {
            "_index": index,
            "@timestamp": (NOW - timedelta(minutes=i)).isoformat().replace("+00:00", "Z"),
            "message": f"py {i}",
            "host": {"name": "web-1"},
            "level": i,
        }
        for i in range(5)
    ]
    assert helpers.bulk(es, docs) == (5, [])
    # The token as an ApiKey, and the body gzip-compressed, as Beats send it.
    compressed = Elasticsearch(router_process.url, api_key=tenant.token, http_compress=True)
    millis = int((NOW - timedelta(minutes=9)).timestamp() * 1000)
    more = [{"_index": index, "_op_type": "create", "@timestamp": millis, "message": "gz"}]
    assert helpers.bulk(compressed, more) == (1, [])

    rows = tenant.rows(owner)
    assert [(row["content"], row["attrs"]) for row in rows] == [
        ("gz", None),
        *[(f"py {i}", {"host": {"name": "web-1"}, "level": i}) for i in reversed(range(5))],
    ]
    assert datetime.fromisoformat(rows[0]["ts"]) == NOW - timedelta(minutes=9)
    assert datetime.fromisoformat(rows[-1]["ts"]) == NOW
    assert {row["owner"] for row in rows} == {owner}


def test_handshakes_and_what_is_not_pretended(router_process, tenant: Tenant) -> None:
    info = tenant.client.get("/")
    assert info.status_code == 200 and info.headers["x-elastic-product"] == "Elasticsearch"
    version = info.json()["version"]
    assert version["build_flavor"] == "default" and version["number"].startswith("8.")
    head = tenant.client.head("/")
    assert head.status_code == 200 and head.headers["x-elastic-product"] == "Elasticsearch"
    health = tenant.client.get("/_cat/health")
    assert health.status_code == 200 and " green " in health.text
    anonymous = httpx.get(f"{router_process.url}/", timeout=10)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["type"] == "security_exception"
    anonymous = httpx.post(f"{router_process.url}/logs/_bulk", content=b"{}\n", timeout=10)
    assert anonymous.status_code == 401 and anonymous.json()["status"] == 401
    for method, path, status in (
        ("GET", "/_search", 404),
        ("POST", "/logs/_doc", 404),
        ("PUT", "/_index_template/x", 404),
        ("GET", "/_bulk", 405),
    ):
        assert tenant.client.request(method, path).status_code == status, path


def test_each_item_is_answered_on_its_own_and_the_good_ones_are_stored(
    router_process, settings: Settings, tenant: Tenant
) -> None:
    owner, foreign = unique("es-items"), unique("es-foreign")
    other = issue_token(settings, unique("es-other"), [AUDIT_WRITE, AUDIT_READ])
    with httpx.Client(base_url=router_process.url, headers=bearer(other), timeout=30) as client:
        assert client.post("/v1/audit", json=[{"owner": foreign, "content": "theirs"}]).is_success
    ts = NOW.isoformat()
    body = ndjson(
        {"index": {}},
        {"@timestamp": ts, "message": "good 1", "owner": owner},
        {"index": {}},
        {"@timestamp": "yesterday", "message": "bad ts", "owner": owner},
        {"create": {"_id": "given"}},
        {"@timestamp": ts, "message": "not mine", "owner": foreign},
        {"index": {}},
        {
            "@timestamp": ts,
            "message": "x" * (settings.ingest.max_content_bytes + 1),
            "owner": owner,
        },
        {"delete": {"_index": owner, "_id": "1"}},
        {"index": {"_index": owner}},
        {"@timestamp": (NOW - timedelta(days=400)).isoformat(), "message": "too old"},
        {"index": {}},
        {"message": "no owner anywhere"},
        {"update": {"_index": owner, "_id": "1"}},
        {"doc": {"message": "x"}},
        {"index": {"_index": owner, "version": 3}},
        {"message": "versioned"},
        {"index": {"_index": f"{owner}-{NOW:%Y.%m.%d}"}},
        {"@timestamp": ts, "message": "good 2", "user": "bob"},
    )
    response = bulk(tenant, body)
    assert response.headers["x-elastic-product"] == "Elasticsearch"
    answer = response.json()
    assert answer["errors"] is True
    assert statuses(response) == [201, 400, 403, 400, 400, 400, 400, 400, 400, 201]
    items = [next(iter(item.values())) for item in answer["items"]]
    assert [item["error"]["type"] for item in items if "error" in item] == [
        "document_parsing_exception",
        "security_exception",
        "document_parsing_exception",
        "illegal_argument_exception",
        "document_parsing_exception",
        "illegal_argument_exception",
        "illegal_argument_exception",
        "illegal_argument_exception",
    ]
    assert "belongs to another tenant" in items[2]["error"]["reason"]
    assert items[2]["_id"] == "given" and items[0]["_index"] == owner
    assert "retention" in items[5]["error"]["reason"]
    assert [(row["content"], row["attrs"]) for row in tenant.rows(owner)] == [
        ("good 1", {"owner": owner}),
        ("good 2", {"user": "bob"}),
    ]
    with httpx.Client(base_url=router_process.url, headers=bearer(other), timeout=30) as client:
        theirs = client.get("/v1/audit/search", params={"owner": foreign, **window()}).json()
    assert [row["content"] for row in theirs["items"]] == ["theirs"]


def test_a_retried_identical_body_stores_nothing_twice(tenant: Tenant) -> None:
    owner = unique("es-retry")
    body = ndjson({"index": {}}, {"message": "once"}, {"create": {}}, {"message": "twice?"})
    first, second = bulk(tenant, body, f"/{owner}/_bulk"), bulk(tenant, body, f"/{owner}/_bulk")
    assert statuses(first) == statuses(second) == [201, 201]
    assert first.json()["items"] == second.json()["items"]
    assert len(tenant.rows(owner)) == 2
    # The same body into another index is another request.
    assert statuses(bulk(tenant, body, f"/{owner}-b/_bulk")) == [201, 201]
    assert len(tenant.rows(f"{owner}-b")) == 2


@pytest.mark.parametrize(
    ("body", "status", "kind"),
    [
        (
            b'{"index":{}}\n{"message":"a"}\nnot json\n{"message":"b"}\n',
            400,
            "x_content_parse_exception",
        ),
        (b'{"index":{}}\n{"message":"a"}\n{"index":{}}\n', 400, "illegal_argument_exception"),
        (b'{"index":{}}\n{"message":"a"}\n{"upsert":{}}\n{}\n', 400, "illegal_argument_exception"),
        (
            b'{"index":{"_index":"x","colour":1}}\n{"message":"a"}\n',
            400,
            "illegal_argument_exception",
        ),
        (b'[1,2]\n{"message":"a"}\n', 400, "illegal_argument_exception"),
        (b"\n\n", 400, "action_request_validation_exception"),
        (
            b'{"index":{}}\n{"message":"' + b"a" * 2_000_000 + b'"}\n',
            413,
            "content_too_long_exception",
        ),
    ],
)
def test_a_malformed_request_is_refused_whole_in_elasticsearchs_form(
    tenant: Tenant, body: bytes, status: int, kind: str
) -> None:
    owner = unique("es-bad")
    response = bulk(tenant, body, f"/{owner}/_bulk")
    assert response.status_code == status, response.text
    error = response.json()
    assert error["status"] == status and error["error"]["type"] == kind
    assert error["error"]["root_cause"][0]["type"] == kind
    assert tenant.rows(owner) == []


def test_gzip_bodies_are_read_and_a_zip_bomb_is_a_413(tenant: Tenant) -> None:
    owner = unique("es-gz")
    body = ndjson({"index": {}}, {"message": "compressed", "n": 1})
    response = bulk(tenant, gzip.compress(body), f"/{owner}/_bulk", **{"content-encoding": "gzip"})
    assert statuses(response) == [201]
    assert [row["content"] for row in tenant.rows(owner)] == ["compressed"]
    # 64 gzip members of 16 MiB of well-formed items each: 1 GiB once inflated, 2 MB sent.
    member = gzip.compress(ndjson({"index": {}}, {"message": "bomb"}) * (2**24 // 32), 9)
    bomb = bulk(tenant, member * 64, f"/{owner}-bomb/_bulk", **{"content-encoding": "gzip"})
    assert bomb.status_code == 413 and bomb.json()["error"]["type"] == "content_too_long_exception"
    assert tenant.rows(f"{owner}-bomb") == []
    broken = bulk(
        tenant, gzip.compress(body)[:-8], f"/{owner}/_bulk", **{"content-encoding": "gzip"}
    )
    assert broken.status_code == 400 and broken.json()["status"] == 400
    other = bulk(tenant, body, f"/{owner}/_bulk", **{"content-encoding": "br"})
    assert (
        other.status_code == 415 and other.json()["error"]["type"] == "media_type_header_exception"
    )


def test_overload_and_an_unavailable_shard_group_ask_for_a_retry(
    router_process, settings: Settings, api: httpx.Client, tenant: Tenant
) -> None:
    group = unique("es-g")
    assert api.post("/v1/admin/groups", json={"name": group}).status_code == 201
    owner = unique("es-nowhere")
    mapped = api.put(
        "/v1/admin/owners",
        json={"kind": "audit", "key": owner, "group": group, "tenant": tenant.name},
    )
    assert mapped.status_code == 200, mapped.text
    response = bulk(tenant, ndjson({"index": {}}, {"message": "m"}), f"/{owner}/_bulk")
    assert response.status_code == 503 and response.headers["retry-after"]
    assert response.json()["error"]["type"] == "unavailable_shards_exception"

    slow = issue_token(settings, tenant.name, [AUDIT_WRITE], limits=TokenLimits(rate_per_s=0.01))
    with httpx.Client(base_url=router_process.url, headers=bearer(slow), timeout=30) as client:
        answers = [client.post("/_bulk", content=b"\n") for _ in range(3)]
    limited = answers[-1]
    assert limited.status_code == 429 and limited.headers["retry-after"]
    assert limited.json()["error"]["type"] == "es_rejected_execution_exception"


RSYSLOG_CONF = """
global(workDirectory="{work}")
module(load="imtcp")
module(load="omelasticsearch")
template(name="doc" type="list" option.jsonf="on") {{
  property(outname="@timestamp" name="timereported" dateFormat="rfc3339" format="jsonf")
  property(outname="message" name="msg" format="jsonf")
  property(outname="hostname" name="hostname" format="jsonf")
  property(outname="app" name="app-name" format="jsonf")
}}
ruleset(name="shipped") {{
  action(type="omelasticsearch" server="127.0.0.1" serverport="{port}" template="doc"
         searchIndex="{index}" bulkmode="on" uid="rsyslog" pwd="{token}"
         errorfile="{work}/errors.json" action.resumeRetryCount="-1" action.resumeInterval="1")
}}
input(type="imtcp" address="127.0.0.1" port="{input_port}" ruleset="shipped")
"""


def test_rsyslog_omelasticsearch_ships_into_the_bulk_api(
    router_process, tenant: Tenant, tmp_path: Path
) -> None:
    owner = unique("es-rsyslog")
    port = router_process.url.rsplit(":", 1)[1]
    input_port = free_port()
    conf = tmp_path / "rsyslog.conf"
    conf.write_text(
        RSYSLOG_CONF.format(
            work=tmp_path,
            port=port,
            index=f"{owner}-{NOW:%Y.%m.%d}",
            token=tenant.token,
            input_port=input_port,
        )
    )
    log = (tmp_path / "rsyslogd.log").open("w")
    process = subprocess.Popen(
        ["rsyslogd", "-n", "-f", str(conf), "-i", str(tmp_path / "rsyslogd.pid")],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        sender = eventually(lambda: _connect(input_port), timeout=15)
        stamps = [NOW - timedelta(seconds=10 * i) for i in range(20)]
        for number, stamp in enumerate(stamps):
            line = f"<13>1 {stamp.isoformat()} web-7 billing - - - rsyslog line {number}\n"
            sender.sendall(line.encode())
        sender.close()
        rows = eventually(lambda: (found := tenant.rows(owner)) and len(found) >= 20 and found)
    finally:
        process.terminate()
        process.wait(timeout=15)
        log.close()
    assert sorted(row["content"] for row in rows) == sorted(f"rsyslog line {n}" for n in range(20))
    by_content = {row["content"]: row for row in rows}
    for number, stamp in enumerate(stamps):
        row = by_content[f"rsyslog line {number}"]
        assert datetime.fromisoformat(row["ts"]) == stamp
        assert row["attrs"] == {"hostname": "web-7", "app": "billing"}
    assert not (tmp_path / "errors.json").exists()


def _connect(port: int) -> socket.socket | None:
    try:
        return socket.create_connection(("127.0.0.1", port), timeout=1)
    except OSError:
        return None


# --- the parser fuzzed against the router ------------------------------------------------

ACTIONS = st.sampled_from(
    [b'{"index":{}}', b'{"create":{"_id":"a"}}', b'{"delete":{"_id":"a"}}', b'{"update":{}}']
)
DOCUMENTS = st.dictionaries(
    st.sampled_from(["message", "@timestamp", "host", "n"]),
    st.one_of(
        st.text(max_size=20),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False),
        st.none(),
        st.booleans(),
    ),
    max_size=4,
).map(lambda document: json.dumps(document).encode())  # json: integers beyond 64 bits too
LINES = st.lists(st.one_of(ACTIONS, DOCUMENTS, st.binary(max_size=30)), max_size=12)


@hypothesis_settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
@given(lines=LINES, gzipped=st.booleans())
def test_fuzzed_bodies_are_never_a_5xx_and_a_refused_one_stores_nothing(
    tenant: Tenant, lines: list[bytes], gzipped: bool
) -> None:
    owner = unique("es-fuzz")
    body = b"\n".join(lines).replace(b"\r", b"") + b"\n"
    headers = {"content-encoding": "gzip"} if gzipped else {}
    response = bulk(tenant, gzip.compress(body) if gzipped else body, f"/{owner}/_bulk", **headers)
    assert response.status_code in (200, 400, 413), response.text
    if response.status_code != 200:
        assert tenant.rows(owner) == []
        return
    created = sum(1 for status in statuses(response) if status == 201)
    assert len(tenant.rows(owner)) == created
