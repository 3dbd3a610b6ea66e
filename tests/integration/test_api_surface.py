"""The one error body, OpenAPI docs, and the optional admin token."""

from __future__ import annotations

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


def test_admin_token_is_enforced_when_configured(settings: Settings, cluster) -> None:
    guarded = settings.model_copy(update={"server": ServerSettings(admin_token="s3cret")})
    with TestClient(create_app(guarded)) as client:
        response = client.get("/v1/admin/catalog")
        assert response.status_code == 401
        assert response.json()["error"]["field"] == "authorization"
        response = client.get("/v1/admin/catalog", headers={"Authorization": "Bearer wrong"})
        assert response.status_code == 401
        for bare in ("s3cret", "Basic s3cret", "Bearers3cret", "Bearer"):
            response = client.get("/v1/admin/catalog", headers={"Authorization": bare})
            assert response.status_code == 401, bare
        for scheme in ("Bearer", "bearer"):
            response = client.get(
                "/v1/admin/catalog", headers={"Authorization": f"{scheme} s3cret"}
            )
            assert response.status_code == 200
        assert client.get("/health/live").status_code == 200
