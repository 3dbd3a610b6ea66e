"""Benchmarks at a tiny scale: their own clusters on free ports, results in a temporary
directory (never over bench/results/)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench import harness
from services.process import free_port
from tests.support import free_port_range


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "results"
    monkeypatch.setattr(harness, "RESULTS", directory)
    # bench_cluster points PGPASSFILE at its cluster's file; the session's comes back after.
    monkeypatch.setenv("PGPASSFILE", os.environ.get("PGPASSFILE", ""))
    return directory


def own_ports(shards: int) -> list[str]:
    """The flags giving a benchmark a cluster and a router on ports nobody uses."""
    return [
        "--base-port",
        str(free_port_range(shards + 1)),
        "--router-port",
        str(free_port()),
    ]
