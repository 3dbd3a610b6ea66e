"""What the CRUD sweep writes: bench/results/crud.json (every cell, the checks as targets, and
under "reference" the path of the founding reports' figures, bench/crud/reference.json), a table
beside those figures, and the plot."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.crud.flows import FlowSet
from bench.crud.sweep import OPERATIONS, Checks, Plan
from bench.harness import verdict, write_results

REFERENCE = Path(__file__).parent / "reference.json"
REFERENCE_NAME = "bench/crud/reference.json"
# The reports' figures this sweep compares with: seconds per 1M rows by operation, batch and
# shared_buffers (the other tables of reference.json sit beside other benchmarks).
PER_MILLION = "s per 1M rows"
CHECKS = (
    "deleted_rows_left",
    "delete_count_mismatches",
    "search_count_mismatches",
    "merge_mismatches",
)


def reference() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(REFERENCE.read_text())
    return loaded


def targets(checks: dict[str, Checks]) -> dict[str, dict[str, Any]]:
    """Each check summed over the memory settings, to be zero."""
    return {
        name: verdict(sum(getattr(c, name) for c in checks.values()), 0, at_most=True)
        for name in CHECKS
    }


def reference_figures() -> list[dict[str, Any]]:
    """The PostgreSQL figures of the reports in seconds per 1M rows with a shared_buffers."""
    return [
        f
        for f in reference()["figures"]
        if f.get("unit") == PER_MILLION
        and f.get("shared_buffers")
        and f["system"].startswith("PostgreSQL")
    ]


def reference_figure(
    figures: list[dict[str, Any]], operation: str, batch: int, shared_buffers: str
) -> float | None:
    for figure in figures:
        if (figure["operation"], figure.get("batch"), figure.get("shared_buffers")) == (
            operation,
            batch,
            shared_buffers,
        ):
            return float(figure["value"])
    return None


def table(payload: dict[str, Any]) -> list[str]:
    """Markdown: per operation and batch, seconds per 1M rows and rows/s under each memory
    setting, and the reports' figure where there is one."""
    settings = payload["memory_settings"]
    figures = reference_figures()
    head = ["operation", "rows/request"]
    for setting in settings:
        head += [f"s per 1M rows ({setting})", f"rows/s ({setting})", f"reports ({setting})"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    by_key = {(c["shared_buffers"], c["operation"], c["batch"]): c for c in payload["cells"]}
    for operation in OPERATIONS:
        for batch in payload["plan"]["batches"]:
            row = [operation, f"{batch:,}"]
            for setting in settings:
                found = by_key.get((setting, operation, batch))
                figure = reference_figure(figures, operation, batch, setting)
                row += [
                    "—" if found is None else f"{found['seconds_per_1m_rows']:,}",
                    "—" if found is None else f"{found['rows_per_s']:,.0f}",
                    "—" if figure is None else f"{figure:,}",
                ]
            lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    lines.append(
        f"Reports' figures: {REFERENCE_NAME} (their machine and method; context, not targets)."
    )
    return lines


def plot(payload: dict[str, Any]) -> Any:
    def draw(figure: Any) -> None:
        figures = reference_figures()
        for position, operation in enumerate(OPERATIONS, start=1):
            axes = figure.add_subplot(2, 3, position)
            for setting in payload["memory_settings"]:
                points = sorted(
                    (c["batch"], c["seconds_per_1m_rows"])
                    for c in payload["cells"]
                    if c["operation"] == operation and c["shared_buffers"] == setting
                )
                axes.plot(
                    [p[0] for p in points],
                    [p[1] for p in points],
                    marker="o",
                    label=f"shardlog, shared_buffers {setting}",
                )
                theirs = sorted(
                    (f["batch"], f["value"])
                    for f in figures
                    if f["operation"] == operation and f.get("shared_buffers") == setting
                )
                if theirs:
                    axes.plot(
                        [p[0] for p in theirs],
                        [p[1] for p in theirs],
                        linestyle="--",
                        marker="x",
                        label=f"reports, shared_buffers {setting}",
                    )
            axes.set_xscale("log")
            axes.set_yscale("log")
            axes.set_xlabel("rows per request (page size for searches)")
            axes.set_ylabel("seconds per 1M rows")
            axes.set_title(operation, fontsize=9)
            axes.grid(alpha=0.3)
            axes.legend(fontsize=6)
        note = "" if figures else " (no reports' figures: ours alone)"
        figure.suptitle(
            f"CRUD sweep through the API, {payload['rows']:,} flows, "
            f"{payload['shards']} shards{note}",
            fontsize=10,
        )

    return draw


def payload(
    rows: int,
    seed: int,
    shards: int,
    plan: Plan,
    flowset: FlowSet,
    measured: dict[str, tuple[list[dict[str, Any]], Checks]],
) -> dict[str, Any]:
    checks = {setting: found[1] for setting, found in measured.items()}
    return {
        "rows": rows,
        "seed": seed,
        "shards": shards,
        "switches": len({r["switch"] for r in flowset.records}),
        "clients": 1,
        "memory_settings": list(measured),
        "plan": asdict(plan),
        "search_keys": {
            "how": "forward IPv4 flows take their source from a few busy hosts and every "
            "forward flow its destination port from a few service ports, each value carried by "
            f"about {max(plan.batches):,} flows or more when the data set is large enough (a "
            "whole page at every page size); "
            "src_ip and dst_port searches name one of them and page through at most "
            "plan.search_rows matches; full-tuple searches name flows spread over the data",
            "src_ip": flowset.busy_host,
            "src_ip_rows": flowset.busy_host_rows,
            "dst_port": flowset.service_port,
            "dst_port_rows": flowset.service_port_rows,
        },
        "cells": [
            {**c, "shared_buffers": setting}
            for setting, (cells, _) in measured.items()
            for c in cells
        ],
        "checks": {setting: asdict(c) for setting, c in checks.items()},
        "targets": targets(checks),
        "reference": REFERENCE_NAME,
        "machine_note": "2 cores shared with other work; router, 13 PostgreSQL and the client "
        "on one host",
    }


def write(payload: dict[str, Any], mode: dict[str, Any]) -> tuple[Path, Path]:
    return write_results("crud", payload, plot(payload), mode=mode)
