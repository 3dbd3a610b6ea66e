"""Flow exporters -> switches in the catalog: through the admin API, the CLI and the store, on the
session cluster. Addresses are drawn per test (the catalog is shared by the session)."""

from __future__ import annotations

import ipaddress
import json
import random
import uuid
from typing import Any

import asyncpg
import httpx
import pytest

from router.catalog import exporters
from router.collector.exporters import ExporterDirectory, ExporterMapping
from router.settings import Settings
from tests.support import eventually, run_cli

FLOW = {"src_ip": "10.9.0.1", "dst_ip": "10.9.0.2", "src_port": 1, "dst_port": 2, "bytes": 3}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def an_address() -> str:
    """An IPv4 address of 10/8 no other test maps (10.0.0.0/16 left to literal addresses)."""
    return f"10.{random.randint(1, 254)}.{random.randint(0, 255)}.{random.randint(1, 254)}"


def a_v6_address() -> str:
    """Spelt as the catalog spells it."""
    return str(ipaddress.IPv6Address(f"2001:db8::{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}"))


def error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()["error"]
    return body


def listed(api: httpx.Client, **params: str) -> list[dict[str, Any]]:
    response = api.get("/v1/admin/exporters", params=params)
    assert response.status_code == 200, response.text
    result: list[dict[str, Any]] = response.json()
    return result


def test_a_mapping_round_trips_through_the_api(api: httpx.Client) -> None:
    address, switch = an_address(), unique("ex-edge")
    made = api.put(f"/v1/admin/exporters/{address}", json={"switch": switch})
    assert made.status_code == 200, made.text
    # The tenant defaults to the caller's: an admin token is the system tenant's.
    mapping = {"address": address, "domain": None, "switch": switch, "tenant": "system"}
    assert made.json() == mapping
    assert mapping in listed(api)
    assert mapping in listed(api, tenant="system")
    assert mapping not in listed(api, tenant="default")

    # One mapping per (address, domain): a domain of its own beside it, and a replacement.
    per_domain = api.put(
        f"/v1/admin/exporters/{address}", json={"switch": f"{switch}-d7", "domain": 7}
    )
    assert per_domain.status_code == 200, per_domain.text
    replaced = api.put(f"/v1/admin/exporters/{address}", json={"switch": f"{switch}-new"})
    assert replaced.json()["switch"] == f"{switch}-new"
    mine = [m for m in listed(api) if m["address"] == address]
    assert mine == [
        {**mapping, "switch": f"{switch}-new"},
        {**mapping, "domain": 7, "switch": f"{switch}-d7"},
    ]

    gone = api.delete(f"/v1/admin/exporters/{address}", params={"domain": 7})
    assert gone.status_code == 204 and gone.content == b""
    assert [m["domain"] for m in listed(api) if m["address"] == address] == [None]
    assert api.delete(f"/v1/admin/exporters/{address}").status_code == 204
    assert not [m for m in listed(api) if m["address"] == address]


def test_removing_what_is_not_mapped_is_404(api: httpx.Client) -> None:
    address = an_address()
    absent = error(api.delete(f"/v1/admin/exporters/{address}"), 404)
    assert absent["field"] == "address" and address in absent["message"]
    api.put(f"/v1/admin/exporters/{address}", json={"switch": unique("ex"), "domain": 1})
    # The mapping of domain 1 is not the every-domain one, nor that of domain 2.
    assert error(api.delete(f"/v1/admin/exporters/{address}"), 404)["field"] == "address"
    response = api.delete(f"/v1/admin/exporters/{address}", params={"domain": 2})
    assert "domain 2" in error(response, 404)["message"]
    assert api.delete(f"/v1/admin/exporters/{address}", params={"domain": 1}).status_code == 204


@pytest.mark.parametrize(
    ("spelt", "canonical"),
    [
        ("::ffff:192.0.2.77", "192.0.2.77"),
        ("::FFFF:c000:24e", "192.0.2.78"),
        ("2001:DB8:0:0:0:0:0:4E", "2001:db8::4e"),
        ("2001:0db8::004f", "2001:db8::4f"),
    ],
)
def test_an_address_has_one_spelling(api: httpx.Client, spelt: str, canonical: str) -> None:
    switch = unique("ex-spelt")
    made = api.put(f"/v1/admin/exporters/{spelt}", json={"switch": switch})
    assert made.status_code == 200, made.text
    assert made.json()["address"] == canonical
    # Set again under the other spelling: the same mapping, replaced, not a second one.
    again = api.put(f"/v1/admin/exporters/{canonical}", json={"switch": f"{switch}-2"})
    assert again.status_code == 200, again.text
    assert [m["switch"] for m in listed(api) if m["address"] == canonical] == [f"{switch}-2"]
    assert api.delete(f"/v1/admin/exporters/{spelt}").status_code == 204
    assert not [m for m in listed(api) if m["address"] == canonical]


@pytest.mark.parametrize(
    ("address", "body", "params", "field"),
    [
        ("10.0.0.256", {"switch": "sw"}, {}, "address"),
        ("010.0.0.1", {"switch": "sw"}, {}, "address"),
        ("fe80::1%25eth0", {"switch": "sw"}, {}, "address"),
        ("router.example", {"switch": "sw"}, {}, "address"),
        ("1" * 65, {"switch": "sw"}, {}, "address"),
        ("10.0.0.1", {"switch": "sw", "domain": -1}, {}, "domain"),
        ("10.0.0.1", {"switch": "sw", "domain": 2**32}, {}, "domain"),
        ("10.0.0.1", {"switch": "sw", "domain": "seven"}, {}, "domain"),
        ("10.0.0.1", {"switch": ""}, {}, "switch"),
        ("10.0.0.1", {"switch": "a\nb"}, {}, "switch"),
        ("10.0.0.1", {"switch": "x" * 257}, {}, "switch"),
        ("10.0.0.1", {}, {}, "switch"),
        ("10.0.0.1", {"switch": "sw", "tenant": "Not A Name"}, {}, "tenant"),
        ("10.0.0.1", {"switch": "sw", "colour": "red"}, {}, "colour"),
        # The platform's keys are the system tenant's only.
        ("10.0.0.1", {"switch": "shardlog.edge", "tenant": "default"}, {}, "switch"),
    ],
)
def test_bad_input_is_422_naming_the_field(
    api: httpx.Client, address: str, body: dict[str, Any], params: dict[str, Any], field: str
) -> None:
    response = api.put(f"/v1/admin/exporters/{address}", json=body, params=params)
    problem = error(response, 422)
    assert problem["code"] == "invalid" and problem["field"] == field, problem
    assert not [m for m in listed(api) if m["address"] == "10.0.0.1"]


@pytest.mark.parametrize(
    ("address", "params", "field"),
    [
        ("10.0.0.1%2532", {}, "address"),
        ("10.0.0.1", {"domain": -1}, "domain"),
        ("10.0.0.1", {"domain": 2**32}, "domain"),
    ],
)
def test_bad_removals_are_422_naming_the_field(
    api: httpx.Client, address: str, params: dict[str, Any], field: str
) -> None:
    response = api.delete(f"/v1/admin/exporters/{address}", params=params)
    assert error(response, 422)["field"] == field


def test_an_unknown_tenant_is_404(api: httpx.Client) -> None:
    response = api.put(
        f"/v1/admin/exporters/{an_address()}", json={"switch": "sw", "tenant": unique("nobody")}
    )
    assert error(response, 404)["field"] == "tenant"
    assert error(api.get("/v1/admin/exporters", params={"tenant": "Bad"}), 422)["field"] == (
        "tenant"
    )


def test_a_switch_of_another_tenant_is_409(api: httpx.Client, default_api: httpx.Client) -> None:
    # The tenant `default` claims a switch by writing a flow of it.
    switch = unique("ex-claimed")
    assert default_api.post("/v1/flows", json=[{"switch": switch, **FLOW}]).status_code == 200
    address = an_address()
    refused = error(api.put(f"/v1/admin/exporters/{address}", json={"switch": switch}), 409)
    assert refused["field"] == "switch" and "'default'" in refused["message"]
    assert not [m for m in listed(api) if m["address"] == address]
    # As the tenant's own it is fine.
    mine = api.put(f"/v1/admin/exporters/{address}", json={"switch": switch, "tenant": "default"})
    assert mine.status_code == 200, mine.text
    # A switch another tenant's exporter is mapped to (and nobody wrote yet) is taken too.
    fresh, other = unique("ex-fresh"), an_address()
    body = {"switch": fresh, "tenant": "default"}
    assert api.put(f"/v1/admin/exporters/{other}", json=body).status_code == 200
    taken = error(api.put(f"/v1/admin/exporters/{an_address()}", json={"switch": fresh}), 409)
    assert taken["field"] == "switch" and "'default'" in taken["message"]
    # The mapping claimed the switch for its tenant: a write of another tenant is refused (the
    # collector's flows would be, were it taken first), and so is moving the exporter to another
    # tenant with that switch; with a switch of its own it moves.
    system_write = api.post("/v1/flows", json=[{"switch": fresh, **FLOW}])
    assert system_write.status_code == 403, system_write.text
    assert error(api.put(f"/v1/admin/exporters/{other}", json={"switch": fresh}), 409)
    moved = api.put(f"/v1/admin/exporters/{other}", json={"switch": unique("ex-moved")})
    assert moved.status_code == 200 and moved.json()["tenant"] == "system", moved.text
    assert default_api.post("/v1/flows", json=[{"switch": fresh, **FLOW}]).status_code == 200


def test_a_change_bumps_the_catalog_version(api: httpx.Client) -> None:
    before = api.get("/v1/admin/catalog").json()["version"]
    address = an_address()
    assert api.put(f"/v1/admin/exporters/{address}", json={"switch": unique("ex")}).is_success
    after_set = eventually(lambda: api.get("/v1/admin/catalog").json()["version"] > before)
    assert after_set
    middle = api.get("/v1/admin/catalog").json()["version"]
    assert api.delete(f"/v1/admin/exporters/{address}").status_code == 204
    assert eventually(lambda: api.get("/v1/admin/catalog").json()["version"] > middle)


def test_a_tenant_with_exporters_is_not_removed(api: httpx.Client) -> None:
    tenant, address = unique("ex-t"), an_address()
    assert api.post("/v1/admin/tenants", json={"name": tenant}).status_code == 201
    switch = unique("ex")
    body = {"switch": switch, "tenant": tenant}
    assert api.put(f"/v1/admin/exporters/{address}", json=body).status_code == 200
    refused = error(api.delete(f"/v1/admin/tenants/{tenant}"), 409)
    assert refused["field"] == "name" and "1 flow exporters" in refused["message"]
    assert "1 owner or switch keys" in refused["message"]
    assert api.delete(f"/v1/admin/exporters/{address}").status_code == 204
    # The mapping claimed the switch for the tenant; the switch stays the tenant's until moved.
    still = error(api.delete(f"/v1/admin/tenants/{tenant}"), 409)
    assert "exporters" not in still["message"] and "1 owner or switch keys" in still["message"]
    owner = api.get("/v1/admin/owners", params={"kind": "flow", "key": switch}).json()
    assert owner["tenant"] == tenant
    moved = {"kind": "flow", "key": switch, "group": owner["group"], "tenant": "system"}
    assert api.put("/v1/admin/owners", json={**moved, "force": True}).status_code == 200
    assert api.delete(f"/v1/admin/tenants/{tenant}").status_code == 204


@pytest.mark.slow
def test_the_cli_round_trip(settings: Settings, api: httpx.Client) -> None:
    address, switch = a_v6_address(), unique("ex-cli")
    made = run_cli(settings, "exporters", "set", address.upper(), switch, "--domain", "5")
    assert made.returncode == 0, made.stderr
    assert f"exporter {address} domain 5 -> switch {switch!r}, tenant system" in made.stdout
    listed_json = run_cli(settings, "exporters", "list", "--tenant", "system", "--json")
    assert listed_json.returncode == 0, listed_json.stderr
    mapping = {"address": address, "domain": 5, "switch": switch, "tenant": "system"}
    assert mapping in json.loads(listed_json.stdout)
    assert mapping in listed(api)  # the router reads the same catalog
    table = run_cli(settings, "exporters", "list")
    assert any(
        line.split() == [address, "5", switch, "system"] for line in table.stdout.splitlines()
    )

    # The other domains of the address, to a switch of another tenant.
    again = run_cli(settings, "exporters", "set", address, f"{switch}-d", "--tenant", "default")
    assert again.returncode == 0, again.stderr
    default = run_cli(settings, "exporters", "list", "--tenant", "default", "--json")
    every = {**mapping, "domain": None, "switch": f"{switch}-d", "tenant": "default"}
    assert every in json.loads(default.stdout)

    removed = run_cli(settings, "exporters", "remove", address, "--domain", "5")
    assert removed.returncode == 0, removed.stderr
    absent = run_cli(settings, "exporters", "remove", address, "--domain", "5")
    assert absent.returncode == 2 and "(address)" in absent.stderr and "not mapped" in absent.stderr
    assert run_cli(settings, "exporters", "remove", address).returncode == 0


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["10.0.0.0/8", "sw"], "address"),
        (["10.0.0.1", "sw", "--domain", "4294967296"], "domain"),
        (["10.0.0.1", "a\tb"], "switch"),
        (["10.0.0.1", "sw", "--tenant", "no-such-tenant"], "tenant"),
    ],
)
def test_the_cli_names_the_field(settings: Settings, args: list[str], field: str) -> None:
    result = run_cli(settings, "exporters", "set", *args)
    assert result.returncode == 2 and f"shardlog: error ({field}):" in result.stderr, result.stderr


async def test_the_collectors_directory_reads_the_stored_mappings(
    catalog_pool: asyncpg.Pool,
) -> None:
    v4, v6, switch = an_address(), a_v6_address(), unique("ex-store")
    made = await exporters.set_exporter(catalog_pool, f"::ffff:{v4}", None, switch, "system")
    assert made == ExporterMapping(v4, None, switch, "system")
    await exporters.set_exporter(catalog_pool, v6, 9, f"{switch}-9", "default")
    try:
        stored = await exporters.list_exporters(catalog_pool)
        assert made in stored
        assert ExporterMapping(v6, 9, f"{switch}-9", "default") in stored
        assert made not in await exporters.list_exporters(catalog_pool, "default")
        directory = ExporterDirectory(stored, "refuse", "system")
        owner = directory.owner(f"::ffff:{v4}", 123)
        assert owner is not None and (owner.switch, owner.tenant) == (switch, "system")
        owner = directory.owner(v6, 9)
        assert owner is not None and (owner.switch, owner.tenant) == (f"{switch}-9", "default")
        assert directory.owner(v6, 10) is None
    finally:
        assert await exporters.remove_exporter(catalog_pool, v4, None)
        assert await exporters.remove_exporter(catalog_pool, v6, 9)
    assert not await exporters.remove_exporter(catalog_pool, v4, None)


async def test_the_table_keeps_one_spelling_too(catalog_pool: asyncpg.Pool) -> None:
    """The CHECKs hold against a writer that skips the store: no network, no mapped address."""
    async with catalog_pool.acquire() as connection:
        for address in ("10.0.0.0/8", "::ffff:10.0.0.1", "2001:db8::/64"):
            with pytest.raises(asyncpg.CheckViolationError):
                await connection.execute(
                    "INSERT INTO exporters (address, switch, tenant) VALUES ($1::inet, 's', "
                    "'system')",
                    address,
                )


def test_a_body_that_is_not_json_is_400(api: httpx.Client) -> None:
    response = api.put(
        f"/v1/admin/exporters/{an_address()}",
        content=b"\xffm",
        headers={"content-type": "application/json"},
    )
    assert error(response, 400)["code"] == "http_error"
