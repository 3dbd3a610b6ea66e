"""Request limits, on an in-process router with small limits against the real cluster."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from router.app import create_app
from router.settings import IngestSettings, Settings
from tests.support import bearer


@pytest.fixture(scope="module")
def small(settings: Settings, cluster, api_token: str):
    limited = settings.model_copy(
        update={
            "ingest": IngestSettings(
                max_body_bytes=4096, max_records=5, inflight_budget_bytes=1024, retry_after_s=3
            )
        }
    )
    with TestClient(create_app(limited), headers=bearer(api_token)) as client:
        yield client


def lines(count: int, size: int = 10) -> bytes:
    return b"".join(b'{"owner":"limits","content":"%s"}\n' % (b"x" * size) for _ in range(count))


def test_body_over_the_limit_is_413(small) -> None:
    response = small.post(
        "/v1/audit", content=lines(3, 2000), headers={"content-type": "application/x-ndjson"}
    )
    assert response.status_code == 413
    assert response.json()["error"]["field"] == "body"


def test_too_many_records_is_413(small) -> None:
    response = small.post(
        "/v1/audit", content=lines(6), headers={"content-type": "application/x-ndjson"}
    )
    assert response.status_code == 413
    assert response.json()["error"]["field"] == "records"


def test_over_the_inflight_budget_is_429_with_retry_after(small) -> None:
    response = small.post(
        "/v1/audit", content=lines(2, 700), headers={"content-type": "application/x-ndjson"}
    )
    assert response.status_code == 429
    assert response.headers["retry-after"] == "3"
    assert response.json()["error"]["code"] == "overloaded"
    # The budget was given back: a small request goes through.
    response = small.post(
        "/v1/audit", content=lines(1), headers={"content-type": "application/x-ndjson"}
    )
    assert response.status_code == 200
