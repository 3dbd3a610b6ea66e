"""Scopes and what a token may touch. Pure: no I/O, exhaustively unit-tested.

A token's scopes are strings:

- what it may do: ``audit:write``, ``audit:read``, ``flows:write``, ``flows:read``, ``reports``,
  ``tail``, ``admin`` (the platform: catalog, tenants, tokens, retention; only tokens of the
  ``system`` tenant may hold it);
- optionally, which part of its tenant it may touch: ``owner:<prefix>`` (audit owner keys that
  start with the prefix) and ``switch:<prefix>`` (flow switch keys). Without any ``owner:``
  scope a token reaches every owner of its tenant; with some, only those the prefixes match.

Every key belongs to one tenant. A token reaches a key of its own tenant (or one not mapped
yet, which its first write claims for the tenant), never another tenant's: ``check_key`` is the
one place that says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from router.catalog.rules import owner_key_problem
from router.errors import Forbidden, Invalid, excerpt

AUDIT_WRITE = "audit:write"
AUDIT_READ = "audit:read"
FLOWS_WRITE = "flows:write"
FLOWS_READ = "flows:read"
REPORTS = "reports"
TAIL = "tail"
ADMIN = "admin"
SCOPES: tuple[str, ...] = (AUDIT_WRITE, AUDIT_READ, FLOWS_WRITE, FLOWS_READ, REPORTS, TAIL, ADMIN)
DATA_SCOPES: tuple[str, ...] = (AUDIT_WRITE, AUDIT_READ, FLOWS_WRITE, FLOWS_READ, REPORTS, TAIL)
# Key prefixes by owner kind: audit owners, flow switches.
PREFIX_OF_KIND = {"audit": "owner:", "flow": "switch:"}
KEY_NAME = {"audit": "owner", "flow": "switch"}
SYSTEM_TENANT = "system"
# Keys the platform keeps for itself (its audit of admin actions is `shardlog.admin`): only the
# system tenant may claim or reach them.
RESERVED_PREFIX = "shardlog."
MAX_SCOPES = 64


@dataclass(frozen=True)
class Grant:
    """What a caller may do: its tenant, its scopes and its key prefixes. ``any_tenant`` is
    the platform itself (CLI, retention job, self-audit) and a router in open mode."""

    tenant: str
    scopes: frozenset[str]
    owner_prefixes: tuple[str, ...] = ()
    switch_prefixes: tuple[str, ...] = ()
    any_tenant: bool = False

    @classmethod
    def of(cls, tenant: str, scopes: Iterable[str]) -> Grant:
        """The grant of a token whose scopes passed ``parse_scopes``."""
        plain: set[str] = set()
        owners: list[str] = []
        switches: list[str] = []
        for scope in scopes:
            if scope.startswith(PREFIX_OF_KIND["audit"]):
                owners.append(scope.removeprefix(PREFIX_OF_KIND["audit"]))
            elif scope.startswith(PREFIX_OF_KIND["flow"]):
                switches.append(scope.removeprefix(PREFIX_OF_KIND["flow"]))
            else:
                plain.add(scope)
        return cls(tenant, frozenset(plain), tuple(owners), tuple(switches))

    def allows(self, scope: str) -> bool:
        return scope in self.scopes

    def prefixes(self, kind: str) -> tuple[str, ...]:
        return self.owner_prefixes if kind == "audit" else self.switch_prefixes


def everything(tenant: str) -> Grant:
    """Every scope on every tenant's keys; new keys go to ``tenant``."""
    return Grant(tenant, frozenset(SCOPES), any_tenant=True)


# The platform acting for itself (CLI, retention, self-audit): new keys belong to `system`.
SYSTEM = everything(SYSTEM_TENANT)


def parse_scopes(values: Iterable[object], tenant: str, field: str = "scopes") -> list[str]:
    """Checked, deduplicated scopes in a stable order (actions as in SCOPES, then prefixes).
    At least one action; ``admin`` only for the system tenant."""
    actions: set[str] = set()
    prefixes: set[str] = set()
    count = 0
    for index, value in enumerate(values):
        count += 1
        where = f"{field}[{index}]"
        if not isinstance(value, str):
            raise Invalid(f"{where}: a scope is a string", where)
        problem = scope_problem(value)
        if problem is not None:
            raise Invalid(f"{where}: {problem}", where)
        (prefixes if ":" in value and value not in SCOPES else actions).add(value)
    if count > MAX_SCOPES:
        raise Invalid(f"{count} scopes; the limit is {MAX_SCOPES}", field)
    if not actions:
        raise Invalid(
            f"a token needs at least one of {', '.join(SCOPES)} (prefixes alone allow nothing)",
            field,
        )
    if ADMIN in actions and tenant != SYSTEM_TENANT:
        raise Invalid(
            f"only tokens of the {SYSTEM_TENANT!r} tenant may hold the admin scope: it reaches "
            "every tenant",
            field,
        )
    return [s for s in SCOPES if s in actions] + sorted(prefixes)


def scope_problem(value: str) -> str | None:
    """Why a string is not a scope, or None."""
    if value in SCOPES:
        return None
    for prefix in PREFIX_OF_KIND.values():
        if value.startswith(prefix):
            key = value.removeprefix(prefix)
            problem = owner_key_problem(key)
            return None if problem is None else f"the prefix of {prefix[:-1]} {problem}"
    return (
        f"{excerpt(value)} is not a scope: one of {', '.join(SCOPES)}, or owner:<prefix> or "
        "switch:<prefix>"
    )


def missing_scope(grant: Grant, scope: str) -> str | None:
    if grant.allows(scope):
        return None
    return f"this token lacks the scope {scope!r}"


def check_scope(grant: Grant, scope: str) -> None:
    problem = missing_scope(grant, scope)
    if problem is not None:
        raise Forbidden(problem, "authorization")


def key_denial(grant: Grant, kind: str, key: str, key_tenant: str | None) -> str | None:
    """Why ``grant`` may not touch ``key`` (of ``key_tenant``; None: not mapped yet), or None.
    The message names the key, never the tenant it belongs to."""
    name = KEY_NAME[kind]
    prefixes = grant.prefixes(kind)
    if prefixes and not key.startswith(prefixes):
        shown = ", ".join(excerpt(p) for p in prefixes[:5])
        return f"{name} {excerpt(key)} is outside this token's {name} prefixes ({shown})"
    if key_tenant is not None and not grant.any_tenant and key_tenant != grant.tenant:
        return f"{name} {excerpt(key)} belongs to another tenant"
    if key.startswith(RESERVED_PREFIX) and grant.tenant != SYSTEM_TENANT and not grant.any_tenant:
        return f"{name} {excerpt(key)} is reserved for the platform ({RESERVED_PREFIX}*)"
    return None


def reserved_write(kind: str, key: str) -> str | None:
    """Why no ingest path may write ``key`` (whatever the token), or None: the platform's keys
    are written by its own self-audit alone."""
    if not key.startswith(RESERVED_PREFIX):
        return None
    name = KEY_NAME[kind]
    return (
        f"{name} {excerpt(key)} is reserved for the platform ({RESERVED_PREFIX}*): only its own "
        "audit writes there"
    )


def check_key(grant: Grant, kind: str, key: str, key_tenant: str | None, field: str) -> None:
    """The one check of key ownership: a 403 naming the key and the request field."""
    problem = key_denial(grant, kind, key, key_tenant)
    if problem is not None:
        raise Forbidden(problem, field)


def check_key_prefix(grant: Grant, kind: str, prefix: str, field: str) -> None:
    """A 403 naming the field when no key that starts with ``prefix`` could pass ``check_key``
    (outside the token's prefixes, or reserved for the platform). Keys that do start with it
    still pass ``key_denial`` one by one: of the token's tenant only."""
    name = KEY_NAME[kind]
    prefixes = grant.prefixes(kind)
    if prefixes and not any(prefix.startswith(p) or p.startswith(prefix) for p in prefixes):
        shown = ", ".join(excerpt(p) for p in prefixes[:5])
        raise Forbidden(
            f"{field} {excerpt(prefix)} is outside this token's {name} prefixes ({shown})", field
        )
    if (
        prefix.startswith(RESERVED_PREFIX)
        and grant.tenant != SYSTEM_TENANT
        and not grant.any_tenant
    ):
        raise Forbidden(
            f"{field} {excerpt(prefix)} is reserved for the platform ({RESERVED_PREFIX}*)", field
        )
