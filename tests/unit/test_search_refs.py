"""Row refs: every row's ref decodes to the row it was made of, anything else is a 400 naming
`ref`, and the point read takes nothing of the ref into its SQL text."""

import ipaddress
import random
import socket
from dataclasses import replace
from datetime import UTC, date, datetime, time, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.errors import BadRequest
from router.search import refs
from router.search.refs import MAX_REF_CHARS, FlowKey, RowRef

shard_names = st.from_regex(r"[a-z][a-z0-9_-]{0,62}", fullmatch=True)
days = st.dates(date(1970, 1, 2), date(9999, 12, 30))
owner_ids = st.integers(1, 2**63 - 1)
row_ids = st.integers(-(2**63), 2**63 - 1)
# In the form searches read them in (router/db/inet.py: inet_ntop).
addresses = st.one_of(
    st.ip_addresses(v=4).map(lambda a: socket.inet_ntop(socket.AF_INET, a.packed)),
    st.ip_addresses(v=6).map(lambda a: socket.inet_ntop(socket.AF_INET6, a.packed)),
)


@st.composite
def audit_refs(draw: st.DrawFn) -> RowRef:
    day = draw(days)
    start = datetime.combine(day, time(), UTC)
    ts = start + timedelta(microseconds=draw(st.integers(0, 86_400 * 10**6 - 1)))
    return RowRef("audit", draw(owner_ids), draw(shard_names), day, draw(row_ids), ts=ts)


@st.composite
def flow_refs(draw: st.DrawFn) -> RowRef:
    flow = FlowKey(
        draw(addresses),
        draw(addresses),
        draw(st.integers(0, 65535)),
        draw(st.integers(0, 65535)),
        draw(st.none() | st.integers(0, 255)),
    )
    return RowRef("flow", draw(owner_ids), draw(shard_names), draw(days), draw(row_ids), flow=flow)


@given(st.one_of(audit_refs(), flow_refs()))
def test_refs_round_trip_url_safe_and_bounded(ref: RowRef) -> None:
    text = refs.encode(ref)
    assert refs.decode(text, ref.kind) == ref
    assert len(text) <= MAX_REF_CHARS
    assert text.replace("-", "").replace("_", "").isalnum()


def test_the_ref_of_a_search_row() -> None:
    ts = datetime(2026, 11, 23, 23, 59, 59, 999999, UTC)
    audit = refs.decode(refs.of_row("audit", 7, {"ts": ts, "shard": "s1", "id": 5}), "audit")
    assert (audit.owner_id, audit.shard, audit.day, audit.id, audit.ts) == (
        7,
        "s1",
        date(2026, 11, 23),
        5,
        ts,
    )
    row = {
        "ts": ts.astimezone(UTC).replace(hour=0),
        "shard": "s2",
        "id": 9,
        "src_ip": "2001:db8::1",
        "dst_ip": "::ffff:10.0.0.1",
        "src_port": 1,
        "dst_port": 2,
        "proto": None,
    }
    flow = refs.decode(refs.of_row("flow", 8, row), "flow")
    assert flow.flow == FlowKey("2001:db8::1", "::ffff:10.0.0.1", 1, 2, None)
    assert flow.table.name == "flow_s8_20261123"


def test_a_ref_of_the_other_kind_names_its_route() -> None:
    ref = RowRef("audit", 1, "s", date(2026, 1, 1), 1, ts=datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.raises(BadRequest, match="/v1/audit/rows/") as caught:
        refs.decode(refs.encode(ref), "flow")
    assert caught.value.field == "ref"


def _valid() -> str:
    return refs.encode(
        RowRef("audit", 3, "s1", date(2026, 1, 1), 1, ts=datetime(2026, 1, 1, 5, tzinfo=UTC))
    )


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not a ref",
        "AAAA",
        "x" * (MAX_REF_CHARS + 1),
        _valid()[:-3],
        _valid() + "AAAA",
        _valid().replace("A", "%"),
        # Its ts on another day than the day it names.
        refs.encode(
            RowRef("audit", 3, "s1", date(2026, 1, 2), 1, ts=datetime(2026, 1, 1, tzinfo=UTC))
        ),
        refs.encode(
            RowRef("audit", 0, "s1", date(2026, 1, 1), 1, ts=datetime(2026, 1, 1, tzinfo=UTC))
        ),
        refs.encode(
            RowRef("audit", 3, "", date(2026, 1, 1), 1, ts=datetime(2026, 1, 1, tzinfo=UTC))
        ),
        refs.encode(
            RowRef("flow", 3, "s", date(2026, 1, 1), 1, flow=FlowKey("::1", "::2", 1, 2, 300))
        ),
    ],
)
def test_malformed_refs_are_a_400_naming_ref(text: str) -> None:
    for kind in ("audit", "flow"):
        with pytest.raises(BadRequest) as caught:
            refs.decode(text, kind)
        assert caught.value.field == "ref"


@given(st.text(max_size=300) | st.binary(max_size=200).map(lambda b: b.hex()))
def test_any_text_is_a_ref_or_a_400(text: str) -> None:
    try:
        ref = refs.decode(text, "audit")
    except BadRequest as exc:
        assert exc.field == "ref"
    else:
        assert ref.kind == "audit"


@given(st.one_of(audit_refs(), flow_refs()), st.one_of(audit_refs(), flow_refs()))
def test_the_point_read_takes_values_as_parameters(ref: RowRef, other: RowRef) -> None:
    """Its text is that of any other row of the same day table (and of a flow without a proto,
    or with one): the ref reaches it through the table's name only, built by db.names."""
    text, params = refs.point_sql(ref)
    assert f'FROM "{ref.table.name}" WHERE' in text
    assert ref.id in params
    if other.kind == ref.kind:
        flow = other.flow
        if ref.flow is not None and flow is not None:
            flow = replace(flow, proto=None if ref.flow.proto is None else flow.proto or 1)
        ts = ref.ts if other.ts is None else other.ts.replace(*ref.day.timetuple()[:3])
        same_table = replace(other, owner_id=ref.owner_id, day=ref.day, ts=ts, flow=flow)
        assert refs.point_sql(same_table)[0] == text
    if ref.flow is not None:
        assert ipaddress.ip_address(params[0]) == ipaddress.ip_address(ref.flow.src_ip)
        assert ("proto IS NULL" in text) == (ref.flow.proto is None)


@pytest.mark.parametrize("seed", range(20))
def test_an_audit_rows_ref_is_its_row_refs_encoding(seed: int) -> None:
    """of_row packs audit refs itself (a page makes one per row): the same text as encode."""
    rng = random.Random(seed)
    ts = datetime(2026, 3, 1, tzinfo=UTC) + timedelta(microseconds=rng.randrange(10**11))
    row = {"ts": ts, "shard": rng.choice(["s1", "shard-07", "x" * 63]), "id": rng.randrange(2**62)}
    owner = rng.randrange(1, 2**40)
    expected = refs.encode(refs.RowRef("audit", owner, row["shard"], ts.date(), row["id"], ts=ts))
    assert refs.of_row("audit", owner, row) == expected
