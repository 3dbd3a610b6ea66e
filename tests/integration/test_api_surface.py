"""The one error body, OpenAPI docs, and the admin token setting of old."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from router.app import create_app
from router.settings import ServerSettings, Settings


def test_unknown_route_uses_the_error_body(api) -> None:
    response = api.get("/v1/nowhere")
    assert response.status_code == 404
    assert response.json() == {
        "error": {"code": "not_found", "message": "Not Found", "field": None}
    }
    response = api.delete("/health/live")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_openapi_documents_every_route(api) -> None:
    assert api.get("/docs").status_code == 200
    paths = set(api.get("/openapi.json").json()["paths"])
    assert {
        "/health/live",
        "/health/ready",
        "/metrics",
        "/v1/admin/catalog",
        "/v1/admin/groups",
        "/v1/admin/shards",
        "/v1/admin/shards/{name}",
        "/v1/admin/shards/{name}/drain",
        "/v1/admin/owners",
    } <= paths


def test_the_old_admin_token_setting_refuses_to_start(settings: Settings, cluster) -> None:
    """SHARDLOG_SERVER__ADMIN_TOKEN is replaced by API tokens: never silently ignored."""
    old = settings.model_copy(update={"server": ServerSettings(admin_token="s3cret")})
    with pytest.raises(RuntimeError, match="shardlog tokens create"), TestClient(create_app(old)):
        pass
