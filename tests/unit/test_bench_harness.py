"""The harness pieces every benchmark shares: verdicts and the progress line."""

from __future__ import annotations

from bench.harness import Progress, verdict


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
