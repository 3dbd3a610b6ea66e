"""Checks that apply to the parameters of every route."""

from __future__ import annotations

from fastapi import Request

from router.errors import Invalid


async def reject_nul(request: Request) -> None:
    """PostgreSQL text cannot hold NUL: a parameter with one could only fail later, as a 500.
    (async: FastAPI would run a plain function in its thread pool, two more turns of the event
    loop for every request.)"""
    for name, value in (*request.query_params.multi_items(), *request.path_params.items()):
        if "\x00" in name or "\x00" in str(value):
            raise Invalid(f"{name.replace(chr(0), '')}: contains a NUL character", name)
