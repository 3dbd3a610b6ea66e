"""Query parameters read into one model (router/api/query_model.py) answer as FastAPI's own
solving of the same model does: the same values, the same errors, the same documentation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any
from urllib.parse import urlencode

import pytest
from fastapi import Depends, FastAPI, Query
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from starlette.requests import Request

from router.api.openapi import without_nul
from router.api.query_model import documented, query_model
from router.api.search import AuditPageQuery, FlowPageQuery
from router.app import create_app
from router.settings import Settings

MODELS: dict[str, type[BaseModel]] = {
    "/v1/audit/search": AuditPageQuery,
    "/v1/flows/search": FlowPageQuery,
}


def side_by_side(model: type[BaseModel]) -> FastAPI:
    """/fastapi: FastAPI solves ``model`` as a query model; /ours: query_model does."""
    app = FastAPI()

    async def by_fastapi(parameters: Any) -> dict[str, Any]:
        return parameters.model_dump(mode="json")  # type: ignore[no-any-return]

    by_fastapi.__annotations__["parameters"] = Annotated[model, Query()]
    app.get("/fastapi")(by_fastapi)

    @app.get("/ours")
    async def by_us(parameters: Any = Depends(query_model(model))) -> dict[str, Any]:  # noqa: B008
        return parameters.model_dump(mode="json")  # type: ignore[no-any-return]

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(
            [{k: e[k] for k in ("loc", "msg", "type")} for e in exc.errors()], status_code=422
        )

    return app


@pytest.fixture(scope="module", params=list(MODELS.values()), ids=list(MODELS))
def client(request: pytest.FixtureRequest) -> Iterator[tuple[type[BaseModel], TestClient]]:
    with TestClient(side_by_side(request.param)) as test_client:
        yield request.param, test_client


def names(model: type[BaseModel]) -> list[str]:
    return [field.alias or name for name, field in model.model_fields.items()]


VALUES = st.sampled_from(
    [
        "",
        "a",
        "0",
        "1",
        "4",
        "6",
        "-3",
        "10",
        "2.5",
        "true",
        "false",
        "yes",
        "off",
        "asc",
        "desc",
        "regex",
        "estimate",
        "fdw",
        "2026-11-24T00:00:00Z",
        "10.0.0.0/8",
        "1000-2000",
        "x" * 300,
        "é\u2028",
    ]
)


@given(data=st.data())
@settings(max_examples=150, deadline=None)
def test_values_and_errors_are_fastapis(
    client: tuple[type[BaseModel], TestClient], data: st.DataObject
) -> None:
    model, test_client = client
    pool = [*names(model), "unknown", "start"]
    pairs = data.draw(st.lists(st.tuples(st.sampled_from(pool), VALUES), max_size=12))
    query = urlencode(pairs)
    theirs = test_client.get(f"/fastapi?{query}")
    ours = test_client.get(f"/ours?{query}")
    assert (ours.status_code, ours.json()) == (theirs.status_code, theirs.json()), query


def test_a_complete_request_is_read(client: tuple[type[BaseModel], TestClient]) -> None:
    model, test_client = client
    key = "owner" if model is AuditPageQuery else "switch"
    answer = test_client.get(
        "/ours",
        params=[
            ("from", "2026-11-24T00:00:00Z"),
            ("to", "2026-11-25T00:00:00Z"),
            (key, "a"),
            (key, "b"),
            ("limit", "7"),
            ("limit", "8"),
            ("order", "desc"),
            ("partial", "false"),
        ],
    )
    assert answer.status_code == 200
    body = answer.json()
    assert (body["start"], body[key], body["limit"], body["order"], body["partial"]) == (
        "2026-11-24T00:00:00Z",
        ["a", "b"],
        8,
        "desc",
        False,
    )


def test_the_routes_document_their_model_once_and_every_reference_resolves() -> None:
    doc = create_app(Settings()).openapi()
    for path, model in MODELS.items():
        parameters = doc["paths"][path]["get"]["parameters"]
        # The schema's last pass says of every query string that it holds no NUL.
        expected = [
            {**parameter, "schema": without_nul(parameter["schema"])}
            for parameter in documented(model)["parameters"]
        ]
        assert parameters == expected
        assert [p["name"] for p in parameters] == names(model)
        for reference in _references(parameters):
            assert reference.removeprefix("#/components/schemas/") in doc["components"]["schemas"]


def _references(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from _references(value)
    elif isinstance(node, list):
        for item in node:
            yield from _references(item)
