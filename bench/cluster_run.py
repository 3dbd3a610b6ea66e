"""What a benchmark on its own cluster needs beside its measurement: the flags naming the
cluster's ports and data directory, and a run of one async measurement with a client of the
cluster's router (its token sent), the data directory removed afterwards unless kept."""

from __future__ import annotations

import argparse
import asyncio
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from bench.harness import BENCH_BASE_PORT, BENCH_ROUTER_PORT, auth_for, bench_cluster
from router.settings import Settings

Measurement = Callable[[httpx.AsyncClient, Any], Awaitable[dict[str, Any]]]


def add_cluster_flags(parser: argparse.ArgumentParser, data_dir: str) -> None:
    parser.add_argument("--base-port", type=int, default=BENCH_BASE_PORT)
    parser.add_argument("--router-port", type=int, default=BENCH_ROUTER_PORT)
    parser.add_argument("--data-dir", type=Path, default=Path(data_dir))
    parser.add_argument("--keep", action="store_true", help="keep the cluster's data directory")


def run(
    settings: Settings,
    keep: bool,
    measurement: Measurement,
    router_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``measurement(client, cluster)`` on a cluster started for it and its router (with
    ``router_env`` in its environment)."""
    try:
        with bench_cluster(settings, router_extra_env=router_env) as (cluster, router):
            assert router is not None

            async def go() -> dict[str, Any]:
                async with httpx.AsyncClient(
                    base_url=router.url, headers=auth_for(router.url), timeout=300
                ) as http:
                    return await measurement(http, cluster)

            return asyncio.run(go())
    finally:
        if not keep:
            shutil.rmtree(settings.cluster.data_dir, ignore_errors=True)
