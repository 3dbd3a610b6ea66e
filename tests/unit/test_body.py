import asyncio

import pytest

from router.errors import BadRequest, Invalid, Overloaded, TooLarge
from router.ingest.body import Body, ByteBudget, csv_flows, json_array, ndjson


def body_of(
    data: bytes, chunk: int = 7, max_bytes: int = 10_000, budget: ByteBudget | None = None
) -> Body:
    async def chunks():
        for start in range(0, len(data), chunk):
            yield data[start : start + chunk]

    return Body(chunks(), max_bytes, budget or ByteBudget(10**9), 1)


def collect(stream) -> list:
    async def go():
        return [item async for batch in stream for item in batch]

    return asyncio.run(go())


def test_ndjson_is_split_across_chunk_boundaries() -> None:
    data = b'{"a": 1}\n\n{"a": 2}\r\n{"a": 3}'
    assert collect(ndjson(body_of(data, chunk=3))) == [(0, {"a": 1}), (1, {"a": 2}), (2, {"a": 3})]


def test_ndjson_bad_line_names_the_record() -> None:
    with pytest.raises(BadRequest) as caught:
        collect(ndjson(body_of(b'{"a": 1}\n{oops\n')))
    assert caught.value.field == "records[1]"


def test_json_array_must_be_an_array() -> None:
    assert collect(json_array(body_of(b'[{"a":1}]'))) == [(0, {"a": 1})]
    with pytest.raises(Invalid):
        collect(json_array(body_of(b'{"a":1}')))
    with pytest.raises(BadRequest):
        collect(json_array(body_of(b"[1,")))


def test_body_limit_and_budget() -> None:
    with pytest.raises(TooLarge):
        collect(ndjson(body_of(b"{}\n" * 100, max_bytes=50)))
    budget = ByteBudget(20)
    body = body_of(b"{}\n" * 100, budget=budget)
    with pytest.raises(Overloaded) as caught:
        collect(ndjson(body))
    assert caught.value.retry_after_s == 1
    body.release()
    assert budget.used == 0


ROWS = [("10.0.0.1", "10.0.0.2", "1", "2", 4), ("2001:db8::1", "2001:db8::2", "3", "4", 6)]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
@pytest.mark.parametrize("final", [True, False])
@pytest.mark.parametrize("header", [True, False])
def test_csv_variants(newline, final, header) -> None:
    lines = [b"src_ip,dest_ip,src_port,dest_port,ip_type"] if header else []
    lines += [b"10.0.0.1,10.0.0.2,1,2,IPv4", b"2001:db8::1,2001:db8::2,3,4,IPv6"]
    data = newline.join(lines) + (newline if final else b"")
    records = collect(csv_flows(body_of(data, chunk=5), "sw"))
    first_line = 2 if header else 1
    assert [n for n, _ in records] == [first_line, first_line + 1]
    for (_, record), (src, dst, sport, dport, version) in zip(records, ROWS, strict=True):
        assert record == {
            "switch": "sw",
            "bytes": 0,
            "src_ip": src,
            "dst_ip": dst,
            "src_port": sport,
            "dst_port": dport,
            "ip_version": version,
        }


def test_csv_header_with_extra_columns() -> None:
    data = (
        b"src_ip,dest_ip,src_port,dest_port,ip_type,ts,bytes,packets\n"
        b"10.0.0.1,10.0.0.2,1,2,ipv4,2026-11-23T00:00:00Z,100,3\n"
    )
    [(line, record)] = collect(csv_flows(body_of(data), "sw"))
    assert line == 2
    assert record["ts"] == "2026-11-23T00:00:00Z"
    assert (record["bytes"], record["packets"]) == ("100", "3")


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (b"10.0.0.1,10.0.0.2,1,2,IPv5\n", "lines[1].ip_type"),
        (b"10.0.0.1,10.0.0.2,1,2\n", "lines[1]"),
        (b"10.0.0.1,10.0.0.2,1,2,IPv4\n10.0.0.1,10.0.0.2,1,2,IPv4,9\n", "lines[2]"),
        (b"src_ip,dest_ip,colour\n", "lines[1]"),
        (b"src_ip,dest_ip,src_port,dest_port\n", "lines[1]"),
        (b"\xff\xfe,1\n", "lines[1]"),
    ],
)
def test_csv_errors_name_the_line(data, field) -> None:
    with pytest.raises(Invalid) as caught:
        collect(csv_flows(body_of(data), "sw"))
    assert caught.value.field == field
