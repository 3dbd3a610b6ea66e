"""Liveness, readiness (every shard probed in parallel) and Prometheus metrics."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

from router.api.deps import RuntimeDep
from router.api.responses import errors, text_answer
from router.catalog.snapshot import Shard
from router.db.failures import DRIVER_ERRORS
from router.errors import error_body
from router.metrics import CONTENT_TYPE
from router.models.health import Live, Readiness, Unready
from router.runtime import Runtime

router = APIRouter(tags=["health"])

_PROBE_ERRORS = DRIVER_ERRORS


@router.get("/health/live", summary="The process is up", response_model=Live, responses=errors())
async def live() -> dict[str, str]:
    return {"status": "live"}


async def _probe(pool: asyncpg.Pool, limit_s: float) -> tuple[bool, float, str | None]:
    started = time.perf_counter()
    try:
        async with asyncio.timeout(limit_s):
            await pool.fetchval("SELECT 1")
    except _PROBE_ERRORS as exc:
        return False, (time.perf_counter() - started) * 1000, f"{type(exc).__name__}: {exc}"
    return True, (time.perf_counter() - started) * 1000, None


async def _shard_report(runtime: Runtime, shard: Shard) -> dict[str, Any]:
    report: dict[str, Any] = {"name": shard.name, "group": shard.group, "state": shard.state}
    if shard.state == "down":
        # Marked down by an operator: not probed, not counted against readiness.
        report.update(reachable=None, latency_ms=None, error=None)
        return report
    reachable, latency, error = await _probe(
        runtime.pools.writer(shard.name), runtime.settings.health.probe_timeout_s
    )
    runtime.metrics.shard_up.labels(shard.name, shard.group).set(1 if reachable else 0)
    report.update(reachable=reachable, latency_ms=round(latency, 2), error=error)
    return report


@router.get(
    "/health/ready",
    summary="Every active or draining shard and the metadata database answer",
    response_model=Readiness,
    responses={
        **errors(),
        503: {
            "model": Unready,
            "description": "Some shard or the metadata database is unreachable; the report "
            "with an error body beside it",
        },
    },
)
async def ready(runtime: RuntimeDep) -> dict[str, Any] | JSONResponse:
    snapshot = runtime.catalog.snapshot
    shards = sorted(snapshot.shards.values(), key=lambda s: s.name)
    metadata_probe, *reports = await asyncio.gather(
        _probe(runtime.metadata, runtime.settings.health.probe_timeout_s),
        *(_shard_report(runtime, shard) for shard in shards),
    )
    unreachable = [r["name"] for r in reports if r["reachable"] is False]
    metadata_ok = metadata_probe[0]
    body: dict[str, Any] = {
        "status": "ready" if metadata_ok and not unreachable else "unready",
        "catalog_version": snapshot.version,
        "metadata": {"reachable": metadata_ok, "error": metadata_probe[2]},
        "shards": reports,
        "unreachable": unreachable,
    }
    if metadata_ok and not unreachable:
        return body  # checked against Readiness by FastAPI
    problems = ([] if metadata_ok else ["metadata database"]) + [
        f"shard {name}" for name in unreachable
    ]
    body.update(error_body("unready", "unreachable: " + ", ".join(problems)))
    return JSONResponse(Unready.model_validate(body).model_dump(mode="json"), status_code=503)


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={**text_answer("text/plain", "Prometheus text format 0.0.4"), **errors()},
)
async def metrics(runtime: RuntimeDep) -> Response:
    return Response(runtime.metrics.render(), media_type=CONTENT_TYPE)
