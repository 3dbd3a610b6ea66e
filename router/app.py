"""create_app(settings): the FastAPI application with its lifespan and the one error handler."""

from __future__ import annotations

import gc
import logging
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from router import clock, memory
from router.api import (
    access,
    admin,
    console,
    es_bulk,
    exporters,
    health,
    identity,
    ingest,
    lifecycle,
    loki,
    openapi,
    otlp,
    reports,
    rows,
    search,
    syslog_senders,
    tail,
)
from router.api.params import reject_nul
from router.auth.middleware import Authenticate
from router.db import catalog_login
from router.db.migrate import pending
from router.errors import BUG_MARKER, Invalid, ShardlogError, error_body
from router.http.allow import allowed_methods
from router.http.observe import ObserveRequests
from router.metrics import Metrics
from router.native import AVAILABLE as NATIVE_AVAILABLE
from router.runtime import Runtime
from router.settings import Settings

log = logging.getLogger("router")


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def create_app(settings: Settings | None = None) -> FastAPI:
    if settings is None:
        # A worker process (SHARDLOG_SERVER__WORKERS > 1): `shardlog serve` set up its clock,
        # not this one's.
        settings = Settings()
        clock.configure(settings.clock)
    if not logging.getLogger().handlers:
        # A worker process (SHARDLOG_SERVER__WORKERS > 1) starts without the logging that
        # `shardlog serve` set up in its parent.
        logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    es_bulk.check_settings(settings)
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        _check_auth_settings(settings)
        _warn_without_native()
        metadata = await catalog_login.open_pool(settings)
        try:
            await catalog_login.check_not_superuser(metadata, settings.metadata)
            await _require_migrated_catalog(metadata, settings)
        except BaseException:
            await metadata.close()
            raise
        runtime = Runtime.build(settings, metadata, metrics)
        catalog = runtime.catalog
        try:
            await catalog.start()
            await runtime.search.load_secret()
            runtime.auth.start()
            runtime.housekeeping.start()
            if settings.retention.enabled:
                runtime.retention_job.start()
            if settings.compaction.enabled:
                runtime.compaction_job.start()
            if settings.shared.enabled:
                runtime.ahead_job.start()
                runtime.promotion_job.start()
            app.state.runtime = runtime
            # Everything built so far lives as long as the process: keep it out of the cyclic
            # collector's full passes, which would otherwise walk it between requests' turns.
            gc.freeze()
            memory.collect_less_often()
            memory.hand_back_large_blocks()
            yield
        finally:
            await runtime.commit_signal.stop()
            await runtime.tail.hub.stop()
            await runtime.auth.stop()
            await runtime.housekeeping.stop()
            await runtime.retention_job.stop()
            await runtime.compaction_job.stop()
            await runtime.ahead_job.stop()
            await runtime.promotion_job.stop()
            await catalog.stop()
            await runtime.pools.close()
            await metadata.close()

    app = FastAPI(
        title="shardlog",
        version="0.1.0",
        summary="Sharded audit-log and network-flow storage and search on PostgreSQL",
        lifespan=lifespan,
        dependencies=[Depends(reject_nul)],
    )
    app.include_router(health.router)
    app.include_router(ingest.router)
    app.include_router(search.router)
    app.include_router(rows.router)
    app.include_router(reports.router)
    app.include_router(tail.router)
    app.include_router(admin.router)
    app.include_router(lifecycle.router)
    app.include_router(access.router)
    app.include_router(exporters.router)
    app.include_router(syslog_senders.router)
    app.include_router(loki.router)
    app.include_router(otlp.router)
    app.include_router(es_bulk.router)
    app.include_router(identity.router)
    app.include_router(console.router)
    _install_error_handlers(app, metrics)
    _install_disconnect_handler(app, metrics)
    app.add_middleware(Authenticate, render=_error_response)
    app.add_middleware(ObserveRequests, metrics=metrics, access_log=settings.server.access_log)
    openapi.install(app)
    return app


def _warn_without_native() -> None:
    if not NATIVE_AVAILABLE:
        log.warning(
            "the native ingest extension (shardlog-native, native/) is not installed: ingest "
            "takes the pure-Python paths, about 1.4x the router's CPU per audit row "
            "(docs/deployment.md: install the shardlog[native] extra)"
        )


def _check_auth_settings(settings: Settings) -> None:
    if settings.server.admin_token is not None:
        raise RuntimeError(
            "SHARDLOG_SERVER__ADMIN_TOKEN is replaced by API tokens: create an admin token with "
            "`shardlog tokens create --tenant system --scopes admin --name admin`, give it to "
            "the admin clients, and unset SHARDLOG_SERVER__ADMIN_TOKEN (docs/security.md)"
        )
    if settings.auth.mode == "open":
        warning = (
            "AUTHENTICATION IS OFF (SHARDLOG_AUTH__MODE=open): anyone who reaches this router "
            "can read and change every tenant's data and the catalog. Use it only on a "
            "trusted, isolated network"
        )
        log.warning("%s", warning)
        print(f"shardlog: WARNING: {warning}", file=sys.stderr, flush=True)


async def _require_migrated_catalog(metadata: asyncpg.Pool, settings: Settings) -> None:
    """A router newer than its catalog would fail request by request: refuse to start instead."""
    missing = await pending(metadata, settings.schema_dir, "metadata")
    if missing:
        names = ", ".join(f"{m.version:04d}_{m.name}" for m in missing)
        raise RuntimeError(
            f"the catalog lacks metadata migrations {names}: run `shardlog migrate` first"
        )


def _field_of(location: tuple[object, ...] | list[object]) -> str:
    parts = [str(p) for p in location if p not in ("body", "query", "path", "header")]
    text = ""
    for part in parts:
        text += f"[{part}]" if part.isdigit() else (f".{part}" if text else part)
    return text or "body"


def _error_response(path: str, exc: ShardlogError) -> JSONResponse:
    """The one error body; on the paths of Elasticsearch's bulk API, Elasticsearch's."""
    if es_bulk.speaks_es(path):
        return es_bulk.error_response(exc)
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers())


def _install_error_handlers(app: FastAPI, metrics: Metrics) -> None:
    @app.exception_handler(ShardlogError)
    async def shardlog_error(request: Request, exc: ShardlogError) -> JSONResponse:
        return _error_response(request.url.path, exc)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        field = _field_of(tuple(first.get("loc", ())))
        message = f"{field}: {first.get('msg', 'invalid')}"
        return _error_response(request.url.path, Invalid(message, field))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            documented = allowed_methods(app.openapi()["paths"], request.url.path)
            headers["Allow"] = ", ".join(documented) or headers.get("Allow", "")
        return JSONResponse(
            error_body(code, str(exc.detail)), status_code=exc.status_code, headers=headers
        )

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        reference = uuid.uuid4().hex[:12]
        metrics.unexpected_errors.inc()
        log.error(
            "%s %s on %s %s (reference %s)",
            BUG_MARKER,
            type(exc).__name__,
            request.method,
            request.url.path,
            reference,
            exc_info=exc,
        )
        return JSONResponse(
            error_body("internal", f"internal error; the router log has reference {reference}"),
            status_code=500,
        )


def _install_disconnect_handler(app: FastAPI, metrics: Metrics) -> None:
    """A client gone while its body was read (it hung up, or was cut off for being too slow:
    router/http/protocol.py) is no bug: nothing was written. The answer is never delivered;
    499 (nginx's "client closed request") is what the metrics record."""

    @app.exception_handler(ClientDisconnect)
    async def client_disconnected(request: Request, _exc: ClientDisconnect) -> JSONResponse:
        metrics.client_disconnects.inc()
        log.info(
            "client left during %s %s before its request was read", request.method, request.url.path
        )
        return JSONResponse(
            error_body("client_disconnected", "the client left before its request was read"),
            status_code=499,
        )
