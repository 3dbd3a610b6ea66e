"""A route's query parameters read into one pydantic model in one pass.

FastAPI solves declared query parameters one at a time (a look-up, a validation and an error
list each): for the thirteen of a search that was about 80 µs of the ~1.2 ms of router CPU a
small first page costs (docs/benchmarks.md, bench/search/rate). A route on that path declares
``Annotated[Model, Depends(query_model(Model))]`` and ``openapi_extra=documented(Model)``
instead: the model's fields are the parameters' declarations (the same ``Annotated[...,
Query(...)]`` aliases), validated by pydantic as FastAPI validates them (lax: text to numbers,
booleans and enums), a failure raised as FastAPI's RequestValidationError located in "query",
and documented as FastAPI documents a query model (tests/unit/test_query_model.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar, get_origin

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


def _names(model: type[BaseModel]) -> tuple[frozenset[str], frozenset[str]]:
    """The parameter names of ``model``, and those that repeat (list fields)."""
    names = {field.alias or name: field for name, field in model.model_fields.items()}
    lists = {name for name, field in names.items() if get_origin(field.annotation) is list}
    return frozenset(names), frozenset(lists)


def query_model(model: type[M]) -> Callable[[Request], Awaitable[M]]:
    """A dependency giving the request's query parameters as ``model``. A parameter given
    more than once counts its last value, unless it is a list (as in FastAPI); names the
    model does not declare are ignored."""
    names, lists = _names(model)

    async def parameters(request: Request) -> M:
        raw: dict[str, Any] = {}
        for name, value in request.query_params.multi_items():
            if name in lists:
                raw.setdefault(name, []).append(value)
            elif name in names:
                raw[name] = value
        try:
            return model.model_validate(raw)
        except ValidationError as exc:
            raise RequestValidationError(
                [
                    {**error, "loc": ("query", *error["loc"])}
                    for error in exc.errors(include_url=False, include_context=False)
                ]
            ) from None

    return parameters


def documented(model: type[BaseModel]) -> dict[str, Any]:
    """The ``openapi_extra`` of a route whose parameters are ``model``: FastAPI does not see
    them there, so they are FastAPI's own description of ``model`` declared as a query model
    (``Annotated[model, Query()]``) on a route of its own. Enumerations they refer to are
    components that other routes declare (tests/unit/test_query_model.py checks each)."""

    async def described(parameters: Any) -> None:
        del parameters

    # Set here, not written in the signature: this module's annotations are strings.
    described.__annotations__["parameters"] = Annotated[model, Query()]
    app = FastAPI()
    app.get("/")(described)
    operation = app.openapi()["paths"]["/"]["get"]
    return {"parameters": operation["parameters"]}
