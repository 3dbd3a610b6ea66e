"""The recorded datagrams under tests/data/flowtruth agree with their README and their expected
totals (v5 decoded here by hand: its records have a fixed layout)."""

from __future__ import annotations

import ipaddress
import json
import struct

from bench.collector.fixtures import FIXTURE_SET, FIXTURES, datagrams, readme
from bench.collector.templates import templates


def test_the_readme_lists_the_templates_the_fixtures_carry() -> None:
    assert (FIXTURES / "README.md").read_text() == readme(FIXTURES)


def test_every_fixture_is_small_and_of_its_version() -> None:
    for fixture in FIXTURE_SET:
        sent = datagrams(FIXTURES / f"{fixture.name}.pcap")
        assert sent and sum(map(len, sent)) < 4096
        assert {int.from_bytes(d[:2]) for d in sent} == {fixture.version}
        ids = {t.template_id for d in sent for t in templates(d)}
        assert ids == (set() if fixture.version == 5 else {256, 1024, 1025, 2048, 2049})


def test_v5_records_equal_the_expected_totals() -> None:
    decoded = []
    for datagram in datagrams(FIXTURES / "v5.pcap"):
        count = struct.unpack_from("!H", datagram, 2)[0]
        for i in range(count):
            record = struct.unpack_from("!4s4s4sHHIIIIHHxBBB", datagram, 24 + 48 * i)
            src, dst, _, _, _, packets, size, _, _, sport, dport, _, proto, _ = record
            decoded.append(
                {
                    "src": str(ipaddress.ip_address(src)),
                    "dst": str(ipaddress.ip_address(dst)),
                    "src_port": sport,
                    "dst_port": dport,
                    "proto": proto,
                    "flows": 1,
                    "packets": packets,
                    "bytes": size,
                }
            )
    expected = json.loads((FIXTURES / "v5.expected.json").read_text())
    assert sorted(decoded, key=str) == sorted(expected, key=str)
