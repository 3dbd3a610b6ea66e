"""The OpenAPI schema as FastAPI builds it, completed: models only ``openapi_extra`` and
``responses`` name (records, export lines, reports, bulk actions) are added to
``components/schemas``, every /v1 operation declares the bearer token scheme (router/auth),
every operation the 431 of the HTTP layer, and any 422 that FastAPI documented with its own
HTTPValidationError gets the error body the app really answers with
(``_install_error_handlers`` in router.app renders validation errors as router.errors). A
reference to a schema that is not defined is a bug: building the schema raises."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from router.api.es_bulk import ES_PATHS
from router.api.responses import REF
from router.auth.dependency import SCHEME_NAME, SECURITY_SCHEME
from router.auth.middleware import guarded
from router.models.errors import Error
from router.models.es_bulk import BulkAction
from router.models.ingest import AuditRecord, FlowRecord
from router.models.report import Report
from router.models.search import AuditItem, FlowItem

# (model, mode): records are read, the others written.
EXTRA_MODELS: tuple[tuple[type[BaseModel], JsonSchemaMode], ...] = (
    (AuditRecord, "validation"),
    (FlowRecord, "validation"),
    (BulkAction, "validation"),
    (AuditItem, "serialization"),
    (FlowItem, "serialization"),
    (Report, "serialization"),
    (Error, "serialization"),
)
FASTAPI_VALIDATION_ERROR = REF + "HTTPValidationError"
NO_NUL = "^[^\\x00]*$"
REFERENCE = re.compile('"' + re.escape(REF) + '([^"]+)"')
# Answered by the HTTP layer (router/http/protocol.py) before any route: any operation can get it.
HEADERS_TOO_LARGE = {
    "description": "The request line and headers are larger than "
    "SHARDLOG_SERVER__MAX_HEADER_BYTES (a query string too long, say)",
    "content": {"application/json": {"schema": {"$ref": REF + "Error"}}},
}


def install(app: FastAPI) -> None:
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = complete(build())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def complete(schema: dict[str, Any]) -> dict[str, Any]:
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    add_models(components, EXTRA_MODELS)
    schema["components"]["securitySchemes"] = {SCHEME_NAME: SECURITY_SCHEME}
    for path, item in schema.get("paths", {}).items():
        if guarded(path):
            for operation in operations({"paths": {path: item}}):
                operation["security"] = [{SCHEME_NAME: []}]
        if path in ES_PATHS:
            # Elasticsearch has no 422: a bad parameter there is its 400 (router.api.es_bulk).
            for operation in operations({"paths": {path: item}}):
                operation.get("responses", {}).pop("422", None)
    for operation in operations(schema):
        for parameter in operation.get("parameters", []):
            if parameter["in"] in ("query", "path"):
                parameter["schema"] = without_nul(parameter["schema"])
        operation.setdefault("responses", {}).setdefault("431", HEADERS_TOO_LARGE)
        operation["responses"] = dict(sorted(operation.get("responses", {}).items()))
        for response in operation["responses"].values():
            for media in response.get("content", {}).values():
                if media.get("schema") == {"$ref": FASTAPI_VALIDATION_ERROR}:
                    media["schema"] = {"$ref": REF + Error.__name__}
    if FASTAPI_VALIDATION_ERROR not in str(schema["paths"]):
        components.pop("HTTPValidationError", None)
        components.pop("ValidationError", None)
    undefined = sorted(set(REFERENCE.findall(json.dumps(schema))) - set(components))
    if undefined:
        raise RuntimeError(f"the OpenAPI schema refers to undefined schemas: {undefined}")
    return schema


def without_nul(schema: dict[str, Any]) -> dict[str, Any]:
    """A query or path parameter never holds NUL (router.api.params.reject_nul): its strings
    say so, unless a pattern of theirs already does."""
    if "anyOf" in schema:
        return {**schema, "anyOf": [without_nul(choice) for choice in schema["anyOf"]]}
    if schema.get("type") == "array" and "items" in schema:
        return {**schema, "items": without_nul(schema["items"])}
    if schema.get("type") == "string" and not {"pattern", "format", "enum"} & schema.keys():
        return {**schema, "pattern": NO_NUL}
    return schema


def add_models(
    components: dict[str, Any], models: Iterable[tuple[type[BaseModel], JsonSchemaMode]]
) -> None:
    _, generated = models_json_schema(list(models), ref_template=REF + "{model}")
    for name, definition in generated.get("$defs", {}).items():
        known = components.setdefault(name, definition)
        if known != definition:
            raise RuntimeError(f"two different schemas are named {name!r} in the OpenAPI schema")


def operations(schema: dict[str, Any]) -> Iterable[dict[str, Any]]:
    methods = ("get", "put", "post", "delete", "patch", "head", "options", "trace")
    for item in schema.get("paths", {}).values():
        yield from (operation for method, operation in item.items() if method in methods)
