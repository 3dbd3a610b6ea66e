import asyncio

import orjson
import pytest

from router.errors import BadRequest, Invalid, Overloaded, TooLarge
from router.ingest.body import Body, ByteBudget, json_array, ndjson
from router.ingest.csv_flows import csv_flows

LONGEST = 2**20


def body_of(
    data: bytes, chunk: int = 7, max_bytes: int = 10_000, budget: ByteBudget | None = None
) -> Body:
    async def chunks():
        for start in range(0, len(data), chunk):
            yield data[start : start + chunk]

    return Body(chunks(), max_bytes, budget or ByteBudget(10**9), 1)


def ndjson_of(body: Body):
    return ndjson(body, LONGEST)


def json_array_of(body: Body):
    return json_array(body, LONGEST)


def collect(stream) -> list:
    async def go():
        return [item async for batch in stream for item in batch]

    return asyncio.run(go())


def test_ndjson_is_split_across_chunk_boundaries() -> None:
    data = b'{"a": 1}\n\n{"a": 2}\r\n{"a": 3}'
    assert collect(ndjson_of(body_of(data, chunk=3))) == [
        (0, {"a": 1}),
        (1, {"a": 2}),
        (2, {"a": 3}),
    ]


def test_ndjson_bad_line_names_the_record() -> None:
    with pytest.raises(BadRequest) as caught:
        collect(ndjson_of(body_of(b'{"a": 1}\n{oops\n')))
    assert caught.value.field == "records[1]"


def test_json_array_must_be_an_array() -> None:
    assert collect(json_array_of(body_of(b'[{"a":1}]'))) == [(0, {"a": 1})]
    with pytest.raises(Invalid):
        collect(json_array_of(body_of(b'{"a":1}')))
    with pytest.raises(BadRequest):
        collect(json_array_of(body_of(b"[1,")))


def test_body_limit_and_budget() -> None:
    with pytest.raises(TooLarge):
        collect(ndjson_of(body_of(b"{}\n" * 100, max_bytes=50)))
    budget = ByteBudget(20)
    body = body_of(b"{}\n" * 100, budget=budget)
    with pytest.raises(Overloaded) as caught:
        collect(ndjson_of(body))
    assert caught.value.retry_after_s == 1
    body.release()
    assert budget.used == 0


ROWS = [("10.0.0.1", "10.0.0.2", 1, 2, 4), ("2001:db8::1", "2001:db8::2", 3, 4, 6)]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
@pytest.mark.parametrize("final", [True, False])
@pytest.mark.parametrize("header", [True, False])
def test_csv_variants(newline, final, header) -> None:
    lines = [b"src_ip,dest_ip,src_port,dest_port,ip_type"] if header else []
    lines += [b"10.0.0.1,10.0.0.2,1,2,IPv4", b"2001:db8::1,2001:db8::2,3,4,IPv6"]
    data = newline.join(lines) + (newline if final else b"")
    records = collect(csv_flows(body_of(data, chunk=5), "sw", LONGEST))
    first_line = 2 if header else 1
    assert [n for n, _ in records] == [first_line, first_line + 1]
    for (_, record), (src, dst, sport, dport, version) in zip(records, ROWS, strict=True):
        assert record == {
            "bytes": 0,
            "src_ip": src,
            "dst_ip": dst,
            "src_port": sport,
            "dst_port": dport,
            "ip_version": version,
            "switch": "sw",
        }


def test_csv_header_with_extra_columns() -> None:
    data = (
        b"src_ip,dest_ip,src_port,dest_port,ip_type,ts,bytes,packets\n"
        b"10.0.0.1,10.0.0.2,1,2,ipv4,2026-11-23T00:00:00Z,100,3\n"
    )
    [(line, record)] = collect(csv_flows(body_of(data), "sw", LONGEST))
    assert line == 2
    assert record["ts"] == "2026-11-23T00:00:00Z"
    assert (record["bytes"], record["packets"]) == (100, 3)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (b"10.0.0.1,10.0.0.2,1,2,IPv5\n", "lines[1].ip_type"),
        (b"10.0.0.1,10.0.0.2,1\n", "lines[1]"),
        (b"10.0.0.1,10.0.0.2,1,2,IPv4\n10.0.0.1,10.0.0.2,1,2,IPv4,9\n", "lines[2]"),
        (b"src_ip,dest_ip,colour\n", "lines[1]"),
        (b"src_ip,dest_ip,src_port\n", "lines[1]"),
        (b"\xff\xfe,1\n", "lines[1]"),
    ],
)
def test_csv_errors_name_the_line(data, field) -> None:
    with pytest.raises(Invalid) as caught:
        collect(csv_flows(body_of(data), "sw", LONGEST))
    assert caught.value.field == field


def test_a_line_longer_than_any_record_is_refused_before_its_end() -> None:
    arrived = []

    async def endless():
        for _ in range(10_000):
            arrived.append(1)
            yield b"x" * 1000

    good = b'{"a": 1}\n{"a": 2}\n'

    async def stream():
        yield good
        async for chunk in endless():
            yield chunk

    body = Body(stream(), 10**9, ByteBudget(10**9), 1)
    with pytest.raises(TooLarge) as caught:
        collect(ndjson(body, 5000))
    assert caught.value.field == "records[2]"
    assert len(arrived) <= 6


def test_a_long_line_within_one_chunk_names_its_record() -> None:
    data = b'{"a": 1}\n' + b'{"a": "' + b"y" * 6000 + b'"}\n'
    with pytest.raises(TooLarge) as caught:
        collect(ndjson(body_of(data, chunk=len(data)), 5000))
    assert caught.value.field == "records[1]"


def test_line_splitting_is_linear() -> None:
    """One 8 MiB line in 64 KiB chunks: joined once, not once per chunk."""
    import time

    def seconds(size: int) -> float:
        line = b'{"a": "' + b"z" * size + b'"}'
        started = time.perf_counter()
        [(_, record)] = collect(ndjson(body_of(line, chunk=65536, max_bytes=2**30), 2**30))
        assert len(record["a"]) == size
        return time.perf_counter() - started

    small, large = seconds(2**20), seconds(2**23)
    assert large < 8 * small * 3 + 0.05, (small, large)


def test_json_array_in_slices_equals_one_parse() -> None:
    records = [
        {"owner": f"o{i}", "content": "},{" * (i % 7), "attrs": {"x": [{}, {}]}}
        for i in range(5000)
    ]
    data = orjson.dumps(records)
    assert [
        r for _, r in collect(json_array(body_of(data, chunk=65536, max_bytes=2**30), 4096))
    ] == records


def test_json_array_element_too_long() -> None:
    data = b"[" + b"{}," * 3000 + b'{"a": "' + b"y" * 3_000_000 + b'"}]'
    with pytest.raises(TooLarge) as caught:
        collect(json_array(body_of(data, chunk=2**20, max_bytes=2**30), 2**20))
    assert caught.value.field == "records[3000]"


def test_csv_header_spellings_switch_column_and_optional_ip_type() -> None:
    data = (
        b"Switch,Source Address,Destination Address,Source Port,Destination Port,"
        b"PROTOCOL,bytes,Packets\n"
        b"edge-1,10.0.0.1,10.0.0.2,1,2,tcp,100,3\n"
        b",2001:db8::1,2001:db8::2,3,4,17,5,1\n"
    )
    [(_, first), (_, second)] = collect(csv_flows(body_of(data), "default-sw", LONGEST))
    assert first == {
        "switch": "edge-1",
        "src_ip": "10.0.0.1",
        "dst_ip": "10.0.0.2",
        "src_port": 1,
        "dst_port": 2,
        "proto": 6,
        "bytes": 100,
        "packets": 3,
    }
    assert second["switch"] == "default-sw"
    assert second["proto"] == 17
    assert "ip_version" not in second


def test_csv_without_header_may_leave_out_ip_type() -> None:
    [(_, record)] = collect(csv_flows(body_of(b"10.0.0.1,10.0.0.2,1,2\n"), "sw", LONGEST))
    assert "ip_version" not in record


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        (b"10.0.0.1,10.0.0.2,\xd9\xa1,2\n", "lines[1].src_port", "is not an integer"),
        (b"10.0.0.1,10.0.0.2, 1 2 ,2\n", "lines[1].src_port", "is not an integer"),
        (b"10.0.0.1,10.0.0.2,1,2\n", "lines[1].switch", "names no switch"),
        (b"src_ip,dst_ip,src_port,dst_port,colour\n", "lines[1]", "unknown CSV column"),
        (b"src_ip,src addr,dst_ip,src_port,dst_port\n", "lines[1]", "repeats src_ip"),
        (b'10.0.0.1,"10.0.0.2,1,2\n', "lines[1]", "not valid CSV"),
    ],
)
def test_csv_refusals(data, field, words) -> None:
    switch = None if words == "names no switch" else "sw"
    with pytest.raises(Invalid) as caught:
        collect(csv_flows(body_of(data), switch, LONGEST))
    assert caught.value.field == field
    assert words in caught.value.message


def test_csv_field_over_the_csv_module_limit_is_a_clean_error() -> None:
    data = b'10.0.0.1,10.0.0.2,1,2,"' + b"9" * 200_000 + b'"\n'
    with pytest.raises(Invalid) as caught:
        collect(csv_flows(body_of(data, chunk=65536, max_bytes=2**30), "sw", LONGEST))
    assert caught.value.field.startswith("lines[1]")
