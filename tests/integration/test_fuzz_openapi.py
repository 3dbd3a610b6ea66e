"""Schema-driven fuzzing (schemathesis) of every operation in /openapi.json against a real
router, with schemathesis' full check set (the CLI's `--checks all`): no 5xx, no status code
the operation does not document, no answer that breaks its documented schema, content type or
headers, no request the schema refuses accepted and none it allows refused (SEMANTIC_REFUSALS
names the rules JSON Schema cannot state), a 405 with the documented methods in Allow, and the
token enforced (missing_required_header, ignored_auth).

It runs against a cluster and router of its own, not the session's: fuzzed requests write
records of random owners, add groups, remap owners, set policies and run retention (which drops
tables cluster-wide). On the session cluster that would change what later tests find, and what
earlier tests left behind (a shard marked down, say) would turn into 503s here.

Even on its own cluster, some operations are constrained, each for a reason given at
CONSTRAINED and EXCLUDED below.

SHARDLOG_FUZZ_EXAMPLES sets the generated examples per operation (default 100: 1m45s on two
shared cores, cluster included; schemathesis adds its boundary and method probes). The examples
are derandomized, so a failure repeats on the same tree; SHARDLOG_FUZZ_RANDOM=1 draws new ones
on every run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from jsonschema import Draft202012Validator
from schemathesis.checks import CHECKS as REGISTERED_CHECKS
from schemathesis.checks import load_all_checks

from router.app import create_app
from router.auth.middleware import guarded
from router.auth.scopes import SCOPES, SYSTEM_TENANT
from router.auth.store import TokenLimits
from router.settings import Settings
from services.router_process import RouterProcess
from tests.support import bearer, cluster_of_its_own, issue_token, running_router, settings_env

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("SHARDLOG_FUZZ_EXAMPLES", "100"))
# Requests without a valid token all end at the token check: a few per operation suffice.
ANONYMOUS_EXAMPLES = max(1, EXAMPLES // 10)
RANDOM = os.environ.get("SHARDLOG_FUZZ_RANDOM") == "1"
NDJSON = "application/x-ndjson"

# Registering a shard connects to whatever a fuzzed connection string names (an empty one means
# libpq's defaults: the local socket, port 5432) and migrates that database: any PostgreSQL
# server on this machine, other people's included. Never fuzzed; tests/integration/
# test_catalog_admin.py covers it with DSNs of its own.
EXCLUDED = {"method": "POST", "path": "/v1/admin/shards"}

# Setting a shard's state would take the fuzz cluster's shards out of service, and every write
# after it would answer 503 by design: these run against a shard that does not exist, which
# keeps their parameters and bodies fuzzed and the cluster whole.
CONSTRAINED = {
    ("PATCH", "/v1/admin/shards/{name}"): {"name": "fuzz-no-such-shard"},
    ("POST", "/v1/admin/shards/{name}/drain"): {"name": "fuzz-no-such-shard"},
}
# A tail stream lasts until its client leaves: these end after a moment, whatever else the
# example asks.
BOUNDED = {
    ("GET", "/v1/audit/tail"): {"duration_s": 0.05},
    ("GET", "/v1/flows/tail"): {"duration_s": 0.05},
}


def constrain(case: schemathesis.Case) -> None:
    fixed = CONSTRAINED.get((case.method.upper(), case.path), {})
    if fixed:
        case.path_parameters = {**(case.path_parameters or {}), **fixed}
    bounded = BOUNDED.get((case.method.upper(), case.path), {})
    if bounded:
        case.query = {**(case.query or {}), **bounded}


@pytest.fixture(scope="module")
def fuzz_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Settings, Path]]:
    """Two shards in two groups and the metadata instance, for this module only."""
    root: Path = tmp_path_factory.mktemp("fuzz")
    with cluster_of_its_own(root, shards=2, groups=2) as (own, _):
        yield own, root


@pytest.fixture(scope="module")
def fuzz_router(fuzz_cluster: tuple[Settings, Path]) -> Iterator[RouterProcess]:
    own, root = fuzz_cluster
    router = RouterProcess(root, own.server.host, own.server.port, env=settings_env(own))
    with running_router(router):
        yield router


@pytest.fixture(scope="module")
def fuzz_token(fuzz_cluster: tuple[Settings, Path]) -> str:
    """Every scope, of the system tenant (which fuzzed DELETE /v1/admin/tenants/{name} cannot
    remove), without a rate limit (429s would only make fewer examples reach the router).
    DELETE /v1/admin/tokens/{token_id} would have to guess its 16 hex digits to revoke it."""
    own, _ = fuzz_cluster
    return issue_token(own, SYSTEM_TENANT, SCOPES, name="fuzz", limits=TokenLimits(rate_per_s=0))


@schemathesis.serializer(NDJSON, "application/ndjson", "application/jsonl")
def _ndjson(_ctx: schemathesis.SerializationContext, value: Any) -> bytes:
    # The schema of an NDJSON body is that of one record: the body is that record on a line.
    # json, not orjson: fuzzed integers go beyond 64 bits.
    return json.dumps(value).encode() + b"\n"


@schemathesis.serializer("application/x-protobuf")
def _protobuf(_ctx: schemathesis.SerializationContext, value: Any) -> bytes:
    # A binary body (Loki's snappy push, OTLP's protobuf) is drawn as schemathesis' Binary,
    # whose bytes are its ``data``: sent as drawn, the decoders meet arbitrary bytes.
    data = getattr(value, "data", value)
    return data if isinstance(data, bytes) else json.dumps(value).encode()


@schemathesis.check
def ndjson_lines_conform(
    ctx: schemathesis.CheckContext, response: schemathesis.Response, case: schemathesis.Case
) -> bool | None:
    """Every line of an NDJSON answer matches the documented schema of one line (schemathesis
    validates whole bodies only)."""
    content_type = next(
        (v[0] for k, v in response.headers.items() if k.lower() == "content-type"), ""
    )
    if response.status_code != 200 or not content_type.startswith(NDJSON):
        return None
    document = case.operation.schema.raw_schema
    line_schema = case.operation.definition.raw["responses"]["200"]["content"][NDJSON]["schema"]
    validator = Draft202012Validator({**line_schema, "components": document["components"]})
    for number, line in enumerate(response.content.splitlines(), 1):
        problems = [error.message for error in validator.iter_errors(orjson.loads(line))]
        assert not problems, f"line {number} of the NDJSON answer: {problems}"
    return None


# schemathesis' full check set (the CLI's `--checks all`; its OpenAPI checks register when
# loaded) and the NDJSON lines (registered above).
load_all_checks()
CHECKS = REGISTERED_CHECKS.get_all()

# The schema the router serves, built here at collection time (one test per operation);
# test_the_router_serves_the_fuzzed_schema makes sure it is the one the router answers with.
OPENAPI = create_app(Settings()).openapi()
# positive_data_acceptance asks that a request the schema allows is not refused with a 4xx of
# its own (400, 422). Where the API has a rule JSON Schema cannot state, a request can keep to
# the schema and still break that rule; each operation below may then answer the status named,
# for the reason given. Everything the schema can state, it states (tests/integration/
# test_openapi_answers.py: "the schema says what the API takes").
PRINTABLE = (
    "an owner or switch key is printable as Unicode's categories say it (str.isprintable), "
    "which a JSON Schema pattern cannot state"
)
SEMANTIC_REFUSALS: tuple[tuple[str, tuple[int, ...], str], ...] = (
    (
        "^/v1/(audit|flows)/(search|export|report|tail)$",
        (400, 422),
        "from must come before to and the range stay within SHARDLOG_SEARCH__MAX_RANGE_DAYS "
        f"(two parameters together); a cursor or `after` is signed by the router; {PRINTABLE}",
    ),
    ("^/v1/(audit|flows)/rows/", (400,), "a ref is signed by the router"),
    (
        "^/v1/admin/compaction$",
        (400,),
        "`after` is a page's next_after: the schema states its shape, not a date's calendar",
    ),
    (
        "^/v1/(audit|flows)$",
        (422,),
        "writes: ts within SHARDLOG_INGEST__FUTURE_SKEW_S of the router's clock and the "
        "owner's retention; dst_ip of src_ip's family; CSV rows by their header; "
        f"DELETE /v1/flows: from before to, within the range limit; {PRINTABLE}",
    ),
    (
        "^/v1/admin/(owners(/promote)?|exporters/.*|tables|retention/policies)$",
        (422,),
        PRINTABLE,
    ),
    (
        "^/v1/admin/syslog-senders/.+$",
        (422,),
        "a sender is a network (an address of either family, a prefix length within the "
        "family's, no host bits set) or cert:<common name>: JSON Schema can state its "
        "characters, not an address's arithmetic",
    ),
    (
        "^/v1/admin/tokens$",
        (422,),
        "expires_at in the future (the router's clock); admin for the system tenant only; "
        f"the token's name and the key prefix of a scope: {PRINTABLE}",
    ),
    (
        "^/(loki/api/v1/push|v1/logs)$",
        (400,),
        "a binary body (snappy-compressed protobuf, protobuf) has a format of its own",
    ),
    (
        "^(/\\{index\\})?/_bulk$",
        (400,),
        "Elasticsearch's NDJSON pairs an action line with a document line; the schema describes "
        "one line",
    ),
)
POSITIVE = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]
CONFIG = schemathesis.Config.from_dict(
    {
        # Reproducers show the values sent: schemathesis would mask `key` and `authorization`.
        "output": {"sanitization": {"enabled": False}},
        "operations": [
            {
                "include-path-regex": path,
                "checks": {
                    "positive_data_acceptance": {
                        "expected-statuses": [*POSITIVE, *map(str, statuses)]
                    }
                },
            }
            for path, statuses, _reason in SEMANTIC_REFUSALS
        ],
    }
)
schema = schemathesis.openapi.from_dict(OPENAPI, config=CONFIG).exclude(**EXCLUDED)
# Cases are drawn at collection time too, before the fuzz token exists: they carry this, and
# the test puts the token in its place.
TOKEN_PLACEHOLDER = "Bearer fuzz-token"


class FuzzToken:
    """The fuzz token, given as schemathesis' own auth: it leaves the header out of the cases
    that test its absence (missing_required_header), and ignored_auth knows the token is real
    and probes the operation without it and with a made-up one."""

    def get(self, _case: schemathesis.Case, _ctx: schemathesis.AuthContext) -> str:
        return TOKEN_PLACEHOLDER

    def set(self, case: schemathesis.Case, value: str, _ctx: schemathesis.AuthContext) -> None:
        headers = {k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"}
        case.headers = {**headers, "Authorization": value}


def with_token(case: schemathesis.Case, token: str) -> None:
    headers = case.headers or {}
    if headers.get("Authorization") == TOKEN_PLACEHOLDER:
        case.headers = {**headers, **bearer(token)}


@pytest.mark.parametrize(
    ("line", "conforms"),
    [
        (
            b'{"ts": "2026-11-23T00:00:00+00:00", "id": 1, "content": "x", "attrs": null, '
            b'"shard": "s", "owner": "o", "ref": "AQEAAAAAAAAAAwALSmcAAAAAAAAAAQFzAAZg5xz4JAA"}',
            True,
        ),
        (b'{"error": {"code": "unavailable", "message": "m", "field": null}}', True),
        (b'{"ts": "2026-11-23T00:00:00+00:00", "id": "1"}', False),
    ],
)
def test_the_ndjson_check_reads_every_line(line: bytes, conforms: bool) -> None:
    case = schema["/v1/audit/export"]["GET"].Case()
    response = schemathesis.Response(
        status_code=200,
        headers={"Content-Type": [NDJSON]},
        content=b"\n".join([line, line]) + b"\n",
        request=requests.Request("GET", "http://router/v1/audit/export").prepare(),
        elapsed=0.0,
        verify=True,
    )
    if conforms:
        ndjson_lines_conform(None, response, case)
    else:
        with pytest.raises(AssertionError, match="line 1 of the NDJSON answer"):
            ndjson_lines_conform(None, response, case)


def test_every_check_schemathesis_has_is_run() -> None:
    expected = {
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
        "negative_data_rejection",
        "positive_data_acceptance",
        "missing_required_header",
        "unsupported_method",
        "allow_header_conformance",
        "use_after_free",
        "ensure_resource_availability",
        "ignored_auth",
        "object_level_authorization",
        "ndjson_lines_conform",
    }
    names = [check.__name__ for check in CHECKS]
    assert set(names) >= expected and len(names) == len(set(names)), names


def test_the_router_serves_the_fuzzed_schema(fuzz_router: RouterProcess) -> None:
    served = httpx.get(f"{fuzz_router.url}/openapi.json", timeout=30)
    assert served.status_code == 200
    assert served.json() == OPENAPI


@schema.parametrize()
@schema.auth.apply(FuzzToken, refresh_interval=None)
@settings(
    max_examples=EXAMPLES,
    derandomize=not RANDOM,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)
def test_every_operation_keeps_to_its_schema(
    case: schemathesis.Case, fuzz_router: RouterProcess, fuzz_token: str
) -> None:
    constrain(case)
    with_token(case, fuzz_token)
    # Authenticated (FuzzToken): what is fuzzed is the operation behind the token check (the
    # token check itself is tests/integration/test_access_matrix.py's).
    response = case.call_and_validate(base_url=fuzz_router.url, checks=CHECKS, timeout=60)
    # 403 stays possible: fuzzed owner mappings may give a key to another tenant.
    if response.request.headers.get("authorization") == bearer(fuzz_token)["Authorization"]:
        assert response.status_code != 401, response.text


@schema.parametrize()
@settings(
    max_examples=ANONYMOUS_EXAMPLES,
    derandomize=not RANDOM,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)
def test_without_a_valid_token_every_v1_operation_is_401(
    case: schemathesis.Case, fuzz_router: RouterProcess
) -> None:
    """As schemathesis sends them: no Authorization header, or one it made up from the
    security scheme. Nothing behind the token check is reached (open operations answer)."""
    constrain(case)
    response = case.call_and_validate(base_url=fuzz_router.url, checks=CHECKS, timeout=60)
    if guarded(case.path):
        # 431: a request line too long is refused by the HTTP layer, before any token check.
        assert response.status_code in (401, 431), response.text
