"""bench/auth's stored verdicts: each cost carries the A/A spread of its own run, and a cost
inside that spread reads as no measurable cost; one above it and above 3 % is a miss."""

from __future__ import annotations

from typing import Any

from bench.auth.__main__ import TARGET_COST, cost_verdict


def result(cost: float, open_pair: float) -> dict[str, Any]:
    """A workload's summary as bench/auth writes it: the one process's tokens over open ratio
    and its two open apps' (the A/A pair) ratio."""
    return {"one_process": {"router_cpu_ratio": 1 + cost, "open_b/open cpu": open_pair}}


def test_the_spread_is_the_a_a_pair_difference_whichever_way_it_goes() -> None:
    assert cost_verdict(result(0.01, 0.97))["aa_spread"] == 0.03
    assert cost_verdict(result(0.01, 1.02))["aa_spread"] == 0.02


def test_a_cost_inside_the_spread_is_no_measurable_cost_and_met_only_in_that_sense() -> None:
    outcome = cost_verdict(result(0.025, 0.97))
    assert outcome["met"] is True and outcome["at_most"] is True
    assert outcome["target"] == TARGET_COST and outcome["value"] == 0.025
    assert outcome["reading"].startswith("no measurable cost")
    assert "met only in that sense" in outcome["reading"]
    below = cost_verdict(result(-0.01, 1.02))
    assert below["met"] and below["reading"].startswith("no measurable cost")


def test_tokens_cheaper_beyond_the_spread_is_no_measurable_cost_either() -> None:
    outcome = cost_verdict(result(-0.036, 1.034))
    assert outcome["met"] and outcome["reading"].startswith("no measurable cost: tokens came out")


def test_a_cost_above_the_spread_within_the_target_is_measurable_and_met() -> None:
    outcome = cost_verdict(result(0.02, 1.01))
    assert outcome["met"] and outcome["reading"].startswith("a measurable cost of +2.0%")


def test_a_cost_above_the_spread_and_above_the_target_is_a_miss() -> None:
    outcome = cost_verdict(result(0.05, 0.98))
    assert outcome["met"] is False and outcome["reading"].startswith("a miss")


def test_a_cost_over_the_target_inside_a_wider_spread_is_no_verdict_and_not_met() -> None:
    outcome = cost_verdict(result(0.04, 0.95))
    assert outcome["met"] is False  # the harness's verdict: value, target, direction
    assert outcome["reading"].startswith("no measurable cost")
    assert "cannot tell" in outcome["reading"]
