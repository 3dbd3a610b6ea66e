"""Elasticsearch's bodies as the bulk API and its handshake answer them, for the OpenAPI
schema (router/protocols/es_bulk.py renders them; an item is never built as a model)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from router.models.common import Out


class BulkTarget(BaseModel):
    """The parameters of one action line."""

    model_config = ConfigDict(extra="forbid")

    index: str | None = Field(
        None,
        alias="_index",
        min_length=1,
        description="The index; the path's when absent. SHARDLOG_ES_BULK__OWNER_RULE makes "
        "the owner of it (or of a document field)",
    )
    id: str | None = Field(
        None,
        alias="_id",
        min_length=1,
        description="Echoed in the answer; not stored, and not checked for uniqueness",
    )
    routing: str | None = Field(None, description="Accepted and ignored")
    pipeline: str | None = Field(None, description="Accepted and ignored")
    require_alias: bool | None = Field(None, description="Accepted and ignored")


class BulkAction(BaseModel):
    """An action line: index or create, followed by the document's line. delete (no document
    line) and update are refused item by item."""

    model_config = ConfigDict(extra="forbid")

    index: BulkTarget | None = None
    create: BulkTarget | None = None
    delete: BulkTarget | None = None
    update: BulkTarget | None = None


class Shards(Out):
    total: int
    successful: int
    failed: int


class EsCause(Out):
    type: str = Field(description="Elasticsearch's error type, e.g. document_parsing_exception")
    reason: str = Field(description="For people; names the item and field when it can")


class BulkResult(Out):
    """The outcome of one item: created (201), or refused with its error."""

    index: str | None = Field(alias="_index", description="The item's index (else its owner)")
    id: str = Field(
        alias="_id", description="The action's _id, else one derived from the body and position"
    )
    status: int = Field(description="201, or 400/403/429 with error")
    version: Literal[1] | None = Field(None, alias="_version")
    result: Literal["created"] | None = None
    shards: Shards | None = Field(None, alias="_shards")
    seq_no: int | None = Field(None, alias="_seq_no")
    primary_term: Literal[1] | None = Field(None, alias="_primary_term")
    error: EsCause | None = None


class BulkItem(Out):
    """One item, under the name of its action."""

    index: BulkResult | None = None
    create: BulkResult | None = None
    delete: BulkResult | None = None
    update: BulkResult | None = None


class BulkAnswer(Out):
    took: int = Field(description="Milliseconds")
    errors: bool = Field(description="Whether any item was refused")
    items: list[BulkItem] = Field(description="One per action, in the request's order")


class EsErrorDetail(Out):
    root_cause: list[EsCause]
    type: str
    reason: str


class EsError(Out):
    """Elasticsearch's error body, which the bulk API and its handshake answer with."""

    error: EsErrorDetail
    status: int


class EsVersion(Out):
    number: str
    build_flavor: Literal["default"]
    build_type: str
    build_hash: str
    build_date: str
    build_snapshot: bool
    lucene_version: str
    minimum_wire_compatibility_version: str
    minimum_index_compatibility_version: str


class EsInfo(Out):
    """GET / as an Elasticsearch 8 node answers it."""

    name: str
    cluster_name: str
    cluster_uuid: str
    version: EsVersion
    tagline: Literal["You Know, for Search"]
