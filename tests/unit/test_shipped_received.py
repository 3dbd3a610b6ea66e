"""router/api/shipped.py's Received: what decoding a body takes is charged to the router's
budget with the body, and once the request ended nothing more is (a decoding thread its
request no longer waits for cannot keep budget the request gave back)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from router.api.shipped import Received
from router.errors import Overloaded
from router.ingest.body import Body, ByteBudget
from router.settings import IngestSettings


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield


def test_charges_go_to_the_budget_until_the_request_ends() -> None:
    budget = ByteBudget(1000)
    body = Body(_nothing(), 1000, budget, retry_after_s=1)
    whole = Received(body, bytearray(b"abc"), IngestSettings())
    whole.charge(600)
    assert budget.used == 600
    with pytest.raises(Overloaded):
        whole.charge(401)
    assert budget.used == 600
    whole.close()
    body.release()
    assert budget.used == 0
    with pytest.raises(Overloaded, match="request ended"):
        whole.charge(1)
    assert budget.used == 0
