"""Hypothesis against the three body formats on the real router: no 5xx whatever the body, and a
refused request stores nothing (each example writes under an owner of its own, searched after)."""

from __future__ import annotations

import json
import os
import uuid
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router import clock

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("SHARDLOG_FUZZ_EXAMPLES", "100"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
NOW = clock.now()
REFUSALS = {400, 413, 415, 422}

hostile_text = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=40),
    st.sampled_from(["", "\x00", "a\u2028b", "\u0085", "0001-01-01T00:00:00+14:00", " 12 "]),
    st.sampled_from(
        [
            "2026-W47-1T00:00:00Z",
            "9" * 300,
            "\ud800".encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
        ]
    ),
)
json_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), hostile_text
)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


def timestamps() -> st.SearchStrategy[Any]:
    recent = st.integers(min_value=0, max_value=3600).map(
        lambda s: (NOW - timedelta(seconds=s)).isoformat()
    )
    return st.one_of(recent, recent, json_value)


@st.composite
def audit_record(draw: st.DrawFn, owner: str) -> dict[str, Any]:
    record: dict[str, Any] = {"owner": draw(st.one_of(st.just(owner), st.just(owner), json_value))}
    record["content"] = draw(st.one_of(st.text(max_size=60), json_value))
    if draw(st.booleans()):
        record["ts"] = draw(timestamps())
    if draw(st.booleans()):
        record["attrs"] = draw(json_value)
    if draw(st.integers(0, 9)) == 0:
        record[draw(st.text(max_size=6))] = draw(json_value)
    return record


@st.composite
def flow_record(draw: st.DrawFn, switch: str) -> dict[str, Any]:
    address = st.one_of(st.ip_addresses().map(str), json_value)
    port = st.one_of(st.integers(-2, 70000), json_value)
    record: dict[str, Any] = {
        "switch": draw(st.one_of(st.just(switch), st.just(switch), json_value)),
        "src_ip": draw(address),
        "dst_ip": draw(address),
        "src_port": draw(port),
        "dst_port": draw(port),
        "bytes": draw(st.one_of(st.integers(-1, 2**64), json_value)),
    }
    for name in ("ts", "proto", "packets", "ip_version"):
        if draw(st.booleans()):
            record[name] = draw(
                timestamps() if name == "ts" else st.one_of(st.integers(-1, 300), json_value)
            )
    return record


def _stored(api, kind: str, key: str) -> int:
    path = "/v1/audit/search" if kind == "audit" else "/v1/flows/search"
    params = {
        "owner" if kind == "audit" else "switch": key,
        "from": (NOW - timedelta(days=1)).isoformat(),
        "to": (NOW + timedelta(days=1)).isoformat(),
        "count": "exact",
        "limit": 1,
    }
    response = api.get(path, params=params)
    assert response.status_code == 200, response.text
    return int(response.json()["count"]["value"])


def _check(api, kind: str, key: str, response) -> None:
    assert response.status_code < 500, response.text
    assert response.status_code in {200, *REFUSALS}, response.text
    if response.status_code != 200:
        assert response.json()["error"]["message"]
        assert len(response.content) < 2000
        assert _stored(api, kind, key) == 0


def _encode(records: list[Any], form: str) -> tuple[bytes, str]:
    if form == "json":
        return json.dumps(records).encode(), "application/json"
    return b"".join(json.dumps(r).encode() + b"\n" for r in records), "application/x-ndjson"


@FUZZ
@given(data=st.data(), form=st.sampled_from(["json", "ndjson"]))
def test_audit_bodies(api, data, form) -> None:
    owner = f"fz-{uuid.uuid4().hex[:12]}"
    records = data.draw(st.lists(audit_record(owner), min_size=1, max_size=6))
    body, media = _encode(records, form)
    _check(
        api, "audit", owner, api.post("/v1/audit", content=body, headers={"content-type": media})
    )


@FUZZ
@given(data=st.data(), form=st.sampled_from(["json", "ndjson"]))
def test_flow_bodies(api, data, form) -> None:
    switch = f"fz-{uuid.uuid4().hex[:12]}"
    records = data.draw(st.lists(flow_record(switch), min_size=1, max_size=6))
    body, media = _encode(records, form)
    _check(
        api, "flow", switch, api.post("/v1/flows", content=body, headers={"content-type": media})
    )


csv_cell = st.one_of(
    st.ip_addresses().map(str),
    st.integers(-5, 70000).map(str),
    st.sampled_from(["IPv4", "IPv6", "tcp", "", '"', "\x00", "\r", " 1 ", "\u0661"]),
    st.text(max_size=12),
)


@FUZZ
@given(
    header=st.one_of(
        st.none(),
        st.lists(
            st.sampled_from(
                [
                    "src_ip",
                    "dst_ip",
                    "src_port",
                    "dst_port",
                    "ip_type",
                    "Protocol",
                    "bytes",
                    "switch",
                    "colour",
                ]
            ),
            min_size=1,
            max_size=8,
        ),
    ),
    rows=st.lists(st.lists(csv_cell, min_size=3, max_size=8), min_size=1, max_size=5),
)
def test_csv_bodies(api, header, rows) -> None:
    switch = f"fz-{uuid.uuid4().hex[:12]}"
    lines = ([",".join(header)] if header else []) + [",".join(row) for row in rows]
    body = "\n".join(lines).encode("utf-8", "surrogatepass")
    response = api.post(
        "/v1/flows", params={"switch": switch}, content=body, headers={"content-type": "text/csv"}
    )
    _check(api, "flow", switch, response)


@FUZZ
@given(
    body=st.binary(max_size=300),
    media=st.sampled_from(["application/json", "application/x-ndjson", "text/csv", "text/plain"]),
    path=st.sampled_from(["/v1/audit", "/v1/flows?switch=fz-bytes"]),
)
def test_raw_bytes(api, body, media, path) -> None:
    response = api.post(path, content=body, headers={"content-type": media})
    assert response.status_code < 500, response.text
