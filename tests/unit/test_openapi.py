"""The OpenAPI schema stays true: every operation documents what it answers, every error
status with the one error body, and the write bodies that the routes read as streams."""

from __future__ import annotations

from typing import Any

import pytest

from router.api.es_bulk import ES_PATHS
from router.app import create_app
from router.auth.middleware import guarded
from router.settings import Settings

ERROR = {"$ref": "#/components/schemas/Error"}
NDJSON_TYPES = ("application/x-ndjson", "application/ndjson", "application/jsonl")
# Bad input in the log shippers' own error forms: Loki's plain text, OTLP's google.rpc.Status.
PROTOCOL_ERRORS = {
    ("POST", "/loki/api/v1/push", "400"): ("text/plain",),
    ("POST", "/v1/logs", "400"): ("application/x-protobuf", "application/json"),
}


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return create_app(Settings()).openapi()


def each_operation(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, item in doc["paths"].items()
        for method, operation in item.items()
        if method in ("get", "put", "post", "delete", "patch")
    ]


def test_every_operation_documents_a_success_with_its_body(doc) -> None:
    missing = []
    for method, path, operation in each_operation(doc):
        successes = {s: r for s, r in operation["responses"].items() if s.startswith("2")}
        if not successes:
            missing.append(f"{method} {path}: no 2xx")
        for status, response in successes.items():
            if status == "204":
                assert "content" not in response, f"{method} {path}: a 204 has no body"
                continue
            schemas = [media.get("schema") for media in response.get("content", {}).values()]
            if not schemas or not all(schemas):
                missing.append(f"{method} {path} {status}: no schema")
            elif {} in schemas or any(s.get("additionalProperties") is True for s in schemas):
                missing.append(f"{method} {path} {status}: an untyped object")
    assert not missing, missing


def test_every_error_status_has_the_error_body(doc) -> None:
    wrong = []
    for method, path, operation in each_operation(doc):
        errors = {s: r for s, r in operation["responses"].items() if s[0] in "45"}
        assert "500" in errors, f"{method} {path} does not document 500"
        for status, response in errors.items():
            schema = response.get("content", {}).get("application/json", {}).get("schema")
            if (method, path, status) == ("GET", "/health/ready", "503"):
                # The readiness report with the error body's `error` beside it.
                unready = doc["components"]["schemas"]["Unready"]
                assert schema == {"$ref": "#/components/schemas/Unready"}
                assert unready["properties"]["error"] == {
                    "$ref": "#/components/schemas/ErrorDetail"
                }
            elif (method, path, status) in PROTOCOL_ERRORS:
                # A log shipper's protocol has an error form of its own for bad input.
                content = response["content"]
                assert set(content) == set(PROTOCOL_ERRORS[method, path, status]), path
            elif path in ES_PATHS and status not in ("431", "500"):
                # Elasticsearch's bulk API and its handshakes answer in Elasticsearch's form.
                if schema != {"$ref": "#/components/schemas/EsError"}:
                    wrong.append(f"{method} {path} {status}: {schema}")
            elif schema != ERROR:
                wrong.append(f"{method} {path} {status}: {schema}")
    assert not wrong, wrong


def test_validation_errors_are_documented_with_our_body_not_fastapis(doc) -> None:
    assert "HTTPValidationError" not in str(doc)
    assert "ValidationError" not in doc["components"]["schemas"]
    for method, path, operation in each_operation(doc):
        if path in ES_PATHS:
            assert "422" not in operation["responses"], f"{method} {path}: Elasticsearch's is 400"
        elif operation.get("parameters") or operation.get("requestBody"):
            assert operation["responses"]["422"]["content"]["application/json"]["schema"] == (
                ERROR
            ), f"{method} {path}"


def test_the_error_body_is_the_one_router_errors_renders(doc) -> None:
    from router.errors import error_body

    schemas = doc["components"]["schemas"]
    assert schemas["Error"]["required"] == ["error"]
    detail = schemas["ErrorDetail"]
    assert set(detail["properties"]) == set(error_body("c", "m", "f")["error"])
    assert detail["additionalProperties"] is False


@pytest.mark.parametrize(
    ("path", "record", "media_types"),
    [
        ("/v1/audit", "AuditRecord", ("application/json", *NDJSON_TYPES)),
        ("/v1/flows", "FlowRecord", ("application/json", *NDJSON_TYPES, "text/csv")),
    ],
)
def test_write_bodies_are_documented_for_every_media_type(doc, path, record, media_types) -> None:
    body = doc["paths"][path]["post"]["requestBody"]
    assert body["required"] is True
    content = body["content"]
    assert tuple(content) == media_types
    ref = f"#/components/schemas/{record}"
    assert content["application/json"]["schema"]["type"] == "array"
    assert content["application/json"]["schema"]["items"] == {"$ref": ref}
    for media_type in NDJSON_TYPES:
        assert content[media_type]["schema"]["$ref"] == ref
        assert f"one {record} per line" in content[media_type]["schema"]["description"]
    if "text/csv" in content:
        csv = content["text/csv"]["schema"]
        assert (
            csv["type"] == "string"
            and "src_ip,dest_ip,src_port,dest_port,ip_type" in (csv["description"])
        )
    assert doc["components"]["schemas"][record]["additionalProperties"] is False


def test_record_schemas_follow_the_ingest_rules(doc) -> None:
    from router.ingest.records import AUDIT_FIELDS, FLOW_FIELDS, MAX_BIGINT

    schemas = doc["components"]["schemas"]
    audit, flow = schemas["AuditRecord"], schemas["FlowRecord"]
    assert set(audit["properties"]) == AUDIT_FIELDS
    assert set(flow["properties"]) == FLOW_FIELDS
    assert set(audit["required"]) == {"owner", "content"}
    assert set(flow["required"]) == {"switch", "src_ip", "dst_ip", "src_port", "dst_port", "bytes"}
    assert flow["properties"]["bytes"]["maximum"] == MAX_BIGINT
    assert flow["properties"]["src_port"]["maximum"] == 65535
    assert audit["properties"]["owner"]["maxLength"] == Settings().ingest.max_owner_chars


def test_exports_document_ndjson_lines_and_csv(doc) -> None:
    for path, item in (("/v1/audit/export", "AuditItem"), ("/v1/flows/export", "FlowItem")):
        content = doc["paths"][path]["get"]["responses"]["200"]["content"]
        assert list(content) == ["application/x-ndjson", "text/csv"]
        assert content["text/csv"]["schema"] == {"type": "string"}
        assert content["application/x-ndjson"]["schema"]["anyOf"] == [
            {"$ref": f"#/components/schemas/{item}"},
            ERROR,
        ]


def test_path_ids_and_names_are_bounded(doc) -> None:
    for path, name in (
        ("/v1/admin/retention/policies/{policy_id}", "policy_id"),
        ("/v1/admin/retention/runs/{run_id}", "run_id"),
    ):
        (parameter,) = [
            p for op in doc["paths"][path].values() for p in op["parameters"] if p["name"] == name
        ]
        assert parameter["schema"]["maximum"] == 2**63 - 1
        assert parameter["schema"]["minimum"] == 1
    for path in ("/v1/admin/shards/{name}", "/v1/admin/groups/{name}/replication"):
        for operation in doc["paths"][path].values():
            (parameter,) = [p for p in operation["parameters"] if p["name"] == "name"]
            assert parameter["schema"]["pattern"] == "^[a-z][a-z0-9_-]{0,62}$"
    policy = doc["components"]["schemas"]["PolicyIn"]["properties"]["keep_days"]
    assert policy["maximum"] == 36_500


def test_the_schema_does_not_name_the_bug_marker(doc) -> None:
    # Fuzzers send the schema's strings back as values: a request line holding the marker made
    # the router log look as if it had met a bug.
    import json

    from router.errors import BUG_MARKER

    assert BUG_MARKER not in json.dumps(doc)


def test_every_v1_operation_needs_a_token_and_says_what_that_answers(doc) -> None:
    assert doc["components"]["securitySchemes"]["token"]["scheme"] == "bearer"
    for method, path, operation in each_operation(doc):
        if guarded(path):
            assert operation.get("security") == [{"token": []}], f"{method} {path}"
            # Every token may ask who it is: that one operation needs no scope, so no 403.
            refused = {"401", "429"} if path == "/v1/whoami" else {"401", "403", "429"}
            assert refused <= set(operation["responses"]), f"{method} {path}"
        else:
            assert "security" not in operation, f"{method} {path} is documented as open"
            assert "401" not in operation["responses"], f"{method} {path}"
