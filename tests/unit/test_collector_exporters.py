"""Exporters to switches (router/collector/exporters.py): mappings by address and domain, the
default name or a refusal for unmapped exporters, the allow-list."""

from __future__ import annotations

from router.collector.exporters import ExporterDirectory, ExporterMapping, Owner, default_switch

MAPPINGS = [
    ExporterMapping("10.0.0.1", None, "edge-1", "acme"),
    ExporterMapping("10.0.0.2", 7, "core-7", "acme"),
    ExporterMapping("10.0.0.2", None, "core", "acme"),
    ExporterMapping("2001:db8::1", None, "v6-edge", "beta"),
]


def test_a_mapping_by_domain_wins_over_the_address_alone() -> None:
    directory = ExporterDirectory(MAPPINGS, "name", "system")
    assert directory.owner("10.0.0.2", 7) == Owner("core-7", "acme")
    assert directory.owner("10.0.0.2", 8) == Owner("core", "acme")
    assert directory.owner("10.0.0.1", 123) == Owner("edge-1", "acme")


def test_addresses_match_in_any_spelling() -> None:
    directory = ExporterDirectory(MAPPINGS, "refuse", "system")
    assert directory.owner("::ffff:10.0.0.1", 0) == Owner("edge-1", "acme")
    assert directory.owner("2001:0db8:0:0::1", 0) == Owner("v6-edge", "beta")


def test_unmapped_exporters_are_named_or_refused() -> None:
    named = ExporterDirectory(MAPPINGS, "name", "system")
    assert named.owner("192.0.2.9", 0) == Owner("exporter-192.0.2.9", "system")
    assert named.owner("2001:db8::9", 0) == Owner("exporter-2001-db8--9", "system")
    assert ExporterDirectory(MAPPINGS, "refuse", "system").owner("192.0.2.9", 0) is None
    assert default_switch("fe80::1") == "exporter-fe80--1"


def test_the_allow_list() -> None:
    open_to_all = ExporterDirectory([], "name", "system")
    assert open_to_all.allows("203.0.113.5")
    listed = ExporterDirectory([], "name", "system", ["10.0.0.0/8", "2001:db8::/32"])
    assert listed.allows("10.200.0.1") and listed.allows("2001:db8::5")
    assert not listed.allows("192.0.2.1") and not listed.allows("not an address")
