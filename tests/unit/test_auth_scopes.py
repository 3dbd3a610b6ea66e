"""router.auth.scopes: which scopes parse, and what a grant may touch."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.auth import scopes
from router.auth.scopes import (
    ADMIN,
    AUDIT_READ,
    AUDIT_WRITE,
    DATA_SCOPES,
    FLOWS_READ,
    SCOPES,
    SYSTEM,
    Grant,
    check_key,
    check_key_prefix,
    check_scope,
    everything,
    key_denial,
    parse_scopes,
)
from router.errors import Forbidden, Invalid


@pytest.mark.parametrize("scope", SCOPES)
def test_every_action_parses_alone(scope: str) -> None:
    tenant = "system" if scope == ADMIN else "acme"
    assert parse_scopes([scope], tenant) == [scope]


def test_order_is_stable_and_repeats_go() -> None:
    given = ["owner:b", FLOWS_READ, "owner:a", AUDIT_WRITE, FLOWS_READ, "switch:x"]
    assert parse_scopes(given, "acme") == [
        AUDIT_WRITE,
        FLOWS_READ,
        "owner:a",
        "owner:b",
        "switch:x",
    ]
    for permutation in itertools.permutations(given[:4]):
        assert parse_scopes(permutation, "acme") == [AUDIT_WRITE, FLOWS_READ, "owner:a", "owner:b"]


@pytest.mark.parametrize(
    ("values", "field", "message"),
    [
        (["audit:delete"], "scopes[0]", "not a scope"),
        ([AUDIT_READ, "Audit:read"], "scopes[1]", "not a scope"),
        ([AUDIT_READ, " audit:read"], "scopes[1]", "not a scope"),
        ([AUDIT_READ, ""], "scopes[1]", "not a scope"),
        ([AUDIT_READ, "owner:"], "scopes[1]", "non-empty"),
        ([AUDIT_READ, "switch:\x00"], "scopes[1]", "control"),
        ([AUDIT_READ, "owner:" + "x" * 257], "scopes[1]", "limit is 256"),
        ([AUDIT_READ, 7], "scopes[1]", "a scope is a string"),
        (["owner:acme-"], "scopes", "at least one of"),
        ([], "scopes", "at least one of"),
        ([ADMIN], "scopes", "only tokens of the 'system' tenant"),
        ([AUDIT_READ] * 65, "scopes", "limit is 64"),
    ],
)
def test_bad_scopes_are_refused_naming_the_entry(values, field, message) -> None:
    with pytest.raises(Invalid, match=message) as caught:
        parse_scopes(values, "acme")
    assert caught.value.field == field


def test_prefixes_keep_their_case_and_colons() -> None:
    grant = Grant.of("acme", parse_scopes([AUDIT_READ, "owner:Acme:eu/", "switch:edge-"], "acme"))
    assert grant.owner_prefixes == ("Acme:eu/",)
    assert grant.switch_prefixes == ("edge-",)
    assert grant.scopes == frozenset({AUDIT_READ})


@pytest.mark.parametrize("held", [(), *[(s,) for s in SCOPES], DATA_SCOPES])
@pytest.mark.parametrize("needed", SCOPES)
def test_a_scope_is_needed_exactly(held: tuple[str, ...], needed: str) -> None:
    grant = Grant("system", frozenset(held))
    if needed in held:
        check_scope(grant, needed)
    else:
        with pytest.raises(Forbidden, match=f"lacks the scope '{needed}'") as caught:
            check_scope(grant, needed)
        assert caught.value.status == 403 and caught.value.field == "authorization"


def test_data_scopes_do_not_include_admin() -> None:
    assert ADMIN not in DATA_SCOPES and set(DATA_SCOPES) | {ADMIN} == set(SCOPES)


# --- keys ------------------------------------------------------------------------------------

ACME = Grant.of("acme", [AUDIT_READ, FLOWS_READ])
NARROW = Grant.of("acme", [AUDIT_READ, FLOWS_READ, "owner:eu-", "owner:us-", "switch:edge-"])


@pytest.mark.parametrize("kind", ["audit", "flow"])
@pytest.mark.parametrize(
    ("grant", "key_tenant", "allowed"),
    [
        (ACME, None, True),  # not mapped yet: claimed by a write, empty for a read
        (ACME, "acme", True),
        (ACME, "other", False),
        (ACME, "system", False),
        (everything("default"), "other", True),
        (SYSTEM, "acme", True),
        (SYSTEM, None, True),
    ],
)
def test_a_key_of_another_tenant_is_refused(kind, grant, key_tenant, allowed) -> None:
    problem = key_denial(grant, kind, "k-1", key_tenant)
    assert (problem is None) == allowed
    if not allowed:
        assert problem == f"{scopes.KEY_NAME[kind]} 'k-1' belongs to another tenant"


@pytest.mark.parametrize(
    ("kind", "key", "allowed"),
    [
        ("audit", "eu-1", True),
        ("audit", "us-", True),
        ("audit", "eu", False),
        ("audit", "EU-1", False),
        ("audit", "xeu-1", False),
        ("audit", "edge-1", False),
        ("flow", "edge-7", True),
        ("flow", "eu-1", False),
        ("flow", "edg", False),
    ],
)
def test_prefixes_narrow_a_grant(kind: str, key: str, allowed: bool) -> None:
    for key_tenant in (None, "acme"):
        problem = key_denial(NARROW, kind, key, key_tenant)
        assert (problem is None) == allowed, (kind, key, key_tenant)
        if not allowed:
            assert "outside this token's" in str(problem) and repr(key) in str(problem)
    # A prefix never opens another tenant's key.
    assert key_denial(NARROW, kind, key, "other") is not None


def test_without_switch_prefixes_every_switch_of_the_tenant_is_reached() -> None:
    only_owners = Grant.of("acme", [FLOWS_READ, "owner:eu-"])
    assert key_denial(only_owners, "flow", "anything", "acme") is None
    assert key_denial(only_owners, "audit", "anything", "acme") is not None


def test_check_key_names_the_field_and_never_the_other_tenant() -> None:
    with pytest.raises(Forbidden) as caught:
        check_key(ACME, "audit", "k-1", "secret-tenant-name", "records[3].owner")
    assert caught.value.field == "records[3].owner"
    assert "secret-tenant-name" not in caught.value.message
    check_key(ACME, "audit", "k-1", "acme", "owner")


@pytest.mark.parametrize(
    ("grant", "kind", "prefix", "allowed"),
    [
        (NARROW, "audit", "eu-", True),
        (NARROW, "audit", "eu", True),  # eu-* keys start with it
        (NARROW, "audit", "us-east", True),
        (NARROW, "audit", "x", False),
        (NARROW, "audit", "edge-", False),
        (NARROW, "flow", "e", True),
        (NARROW, "flow", "eu-", False),
        (ACME, "flow", "anything", True),
        (ACME, "audit", "shardlog.", False),
        (ACME, "audit", "shardlog.adm", False),
        (ACME, "audit", "shardlog", True),  # shardlogs-1 may be acme's
        (SYSTEM, "audit", "shardlog.", True),
    ],
)
def test_a_prefix_is_refused_when_no_key_with_it_could_be_reached(
    grant: Grant, kind: str, prefix: str, allowed: bool
) -> None:
    if allowed:
        check_key_prefix(grant, kind, prefix, "f_prefix")
        return
    with pytest.raises(Forbidden) as caught:
        check_key_prefix(grant, kind, prefix, "f_prefix")
    assert caught.value.field == "f_prefix" and repr(prefix) in caught.value.message


# Keys and prefixes from pieces of the grants' prefixes and the reserved one.
PIECES = st.lists(st.sampled_from(["e", "u", "eu-", "us-", "edge-", "shardlog", ".", "x"]))


@given(
    st.sampled_from([ACME, NARROW, SYSTEM]),
    st.sampled_from(["audit", "flow"]),
    PIECES.filter(bool).map("".join),
    PIECES.map("".join),
)
def test_a_refused_prefix_hides_no_reachable_key(grant, kind, prefix, rest) -> None:
    """check_key_prefix refuses only prefixes that no key check_key accepts starts with."""
    if key_denial(grant, kind, prefix + rest, grant.tenant) is None:
        check_key_prefix(grant, kind, prefix, "f_prefix")


def test_a_long_key_is_quoted_short() -> None:
    problem = key_denial(ACME, "audit", "x" * 256, "other")
    assert problem is not None and len(problem) < 200 and "(256 characters)" in problem


def test_system_and_open_grants_hold_every_scope() -> None:
    for grant in (SYSTEM, everything("default")):
        for scope in SCOPES:
            check_scope(grant, scope)
    assert SYSTEM.tenant == "system" and SYSTEM.any_tenant
