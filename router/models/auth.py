"""Bodies of the tenants and tokens admin API (router/api/access.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from router.auth.scopes import MAX_SCOPES, SCOPES
from router.auth.store import MAX_DESCRIPTION_CHARS, MAX_TOKEN_NAME_CHARS
from router.catalog.rules import MAX_OWNER_KEY_CHARS, NAME_PATTERN
from router.models.admin import Body
from router.models.common import JsonInt, Out, Timestamp

TenantName = Field(
    pattern=NAME_PATTERN.pattern,
    description="1-63 characters: lowercase letters, digits, '_' or '-', starting with a letter",
)


class TenantIn(Body):
    name: str = TenantName
    description: str = Field(
        "", max_length=MAX_DESCRIPTION_CHARS, json_schema_extra={"pattern": "^[^\\x00]*$"}
    )


class Tenant(Out):
    name: str
    description: str
    created_at: Timestamp
    owners: int = Field(description="Owner and switch keys that belong to the tenant")
    tokens: int = Field(description="Tokens of the tenant that are neither revoked nor expired")


class TokenLimitsIn(Body):
    rate_per_s: float | None = Field(
        None, ge=0, le=1e9, description="Requests per second; 0: none; null: the default"
    )
    ingest_bytes_per_s: JsonInt | None = Field(
        None, ge=0, le=2**63 - 1, description="Write body bytes per second; 0: none; null: default"
    )
    max_searches: JsonInt | None = Field(
        None, ge=1, le=2**31 - 1, description="Searches and exports at once; null: the default"
    )


class TokenLimits(Out):
    rate_per_s: float | None = Field(description="null: the router's default")
    ingest_bytes_per_s: int | None = Field(description="null: the router's default")
    max_searches: int | None = Field(description="null: the router's default")


class TokenIn(Body):
    tenant: str = TenantName
    name: str = Field(
        min_length=1,
        max_length=MAX_TOKEN_NAME_CHARS,
        description="What the token is for (shown in listings and the audit of admin actions)",
    )
    scopes: list[str] = Field(
        min_length=1,
        max_length=MAX_SCOPES,
        description=f"Some of {', '.join(SCOPES)} (admin: system tenant only), and optionally "
        "owner:<prefix> / switch:<prefix> to reach only the keys with those prefixes",
        # router.auth.scopes.parse_scopes checks them, with messages naming the item.
        json_schema_extra={
            "items": {
                "type": "string",
                "anyOf": [
                    {"enum": list(SCOPES)},
                    {"pattern": f"^(owner|switch):.{{1,{MAX_OWNER_KEY_CHARS}}}$"},
                ],
            },
            "contains": {"enum": list(SCOPES)},
        },
    )
    expires_at: str | None = Field(
        None,
        max_length=40,
        json_schema_extra={"format": "date-time"},
        description="RFC 3339, in the future; null: never expires",
    )
    limits: TokenLimitsIn = Field(default_factory=TokenLimitsIn)


class Token(Out):
    id: str = Field(description="The public id: 16 hex digits, part of the token's text")
    tenant: str
    name: str
    scopes: list[str]
    state: Literal["active", "expired", "revoked"]
    limits: TokenLimits
    created_at: Timestamp
    created_by: str
    expires_at: Timestamp | None
    revoked_at: Timestamp | None
    last_used_at: Timestamp | None = Field(
        description="Written by routers every few seconds (SHARDLOG_AUTH__LAST_USED_FLUSH_S)"
    )


class NewToken(Token):
    token: str = Field(
        description="shl_<id>_<secret>: shown this once and never again (only a hash is kept)"
    )


class Identity(Out):
    """What the calling token is and may do (GET /v1/whoami): a client shows only that."""

    tenant: str = Field(description="The tenant whose keys the token reaches")
    token_id: str | None = Field(description="The token's public id; null in open mode")
    token_name: str
    scopes: list[str] = Field(description="Action scopes: audit:read, flows:write, admin, ...")
    owner_prefixes: list[str] = Field(
        description="owner: prefixes the token is held to; empty: every owner of its tenant"
    )
    switch_prefixes: list[str] = Field(
        description="switch: prefixes the token is held to; empty: every switch of its tenant"
    )
    any_tenant: bool = Field(description="True only in open mode: every tenant's keys")
