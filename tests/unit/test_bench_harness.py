"""The harness pieces every benchmark shares: verdicts, the progress line, and the
postgresql.conf values a benchmark starts its cluster with."""

from __future__ import annotations

from pathlib import Path

from bench.harness import Progress, bench_settings, verdict
from router.cli.cluster import local_cluster
from services.templates import render


def test_verdict_at_most_and_at_least() -> None:
    assert verdict(0.3, 0.5)["met"] is True
    assert verdict(0.7, 0.5)["met"] is False
    assert verdict(0.7, 0.5, at_most=False)["met"] is True
    assert verdict(0.3, 0.5, at_most=False) == {
        "value": 0.3,
        "target": 0.5,
        "met": False,
        "at_most": False,
    }


def test_progress_line_counts_rate_and_eta() -> None:
    progress = Progress("insert", 1000, every_s=3600)
    progress.done = 250
    line = progress.line(progress._started + 5)
    assert "insert: 250/1,000 rows (25 %)" in line
    assert "50 rows/s" in line
    assert "ETA 15 s" in line


def test_bench_cluster_parameters_reach_every_instance_config(tmp_path: Path) -> None:
    settings = bench_settings(tmp_path, shards=3, groups=1)
    cluster = local_cluster(settings, ha=False, parameters={"shared_buffers": "1GB"})
    assert len(cluster.instances) == 4
    for instance in cluster.instances.values():
        conf = render("postgresql.conf.j2", port=instance.spec.port, **instance.settings)
        assert "shared_buffers = '1GB'" in conf
    default = next(iter(local_cluster(settings, ha=False).instances.values()))
    assert "shared_buffers = '256MB'" in render("postgresql.conf.j2", port=1, **default.settings)
