"""A YCSB session against one router: load once, then run each workload in turn on the same
records (inserts of one workload are records of the next), then the results: YCSB's text per
phase under bench/results/ycsb/, and bench/results/ycsb.{json,png}."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from bench import harness
from bench.ycsb.measurements import Measurements, ycsb_text
from bench.ycsb.properties import PropertyError, Workload
from bench.ycsb.records import Layout
from bench.ycsb.runner import Records, expected_inserts, load, run
from bench.ycsb.store import ShardlogStore
from router import clock

# Up to this many versions of a record (a slot of 0.1 s of ts per record).
DEFAULT_SLOT_US = 100_000
# Rows older than the owner's retention are refused; keep the whole key space inside it.
MAX_SPAN = timedelta(days=29)
# The record shape is shared by every phase of a session.
SHAPE = ("fieldcount", "fieldlength", "fieldnameprefix", "zeropadding", "insertorder")


@dataclass
class Phase:
    name: str
    measurements: Measurements

    @property
    def text(self) -> str:
        return ycsb_text(self.measurements)


@dataclass
class Session:
    owner: str
    layout: Layout
    workloads: list[Workload]
    phases: list[Phase] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    records: int = 0

    @property
    def failed(self) -> int:
        return sum(phase.measurements.failed for phase in self.phases)


def plan_layout(workloads: list[Workload], slot_us: int, now: datetime) -> Layout:
    """Slots for every record the session may hold (the load's, and twice each workload's
    promised inserts), the newest ending a minute before ``now``."""
    capacity = workloads[0].recordcount + sum(expected_inserts(w) for w in workloads) + 1
    span = timedelta(microseconds=capacity * slot_us)
    if span > MAX_SPAN:
        raise PropertyError(
            f"{capacity:,} records of {slot_us} us slots span {span}; retention accepts "
            f"{MAX_SPAN}: lower --slot-us or the counts"
        )
    origin = (now - span - timedelta(minutes=1)).replace(microsecond=0)
    return Layout(origin, slot_us)


def check_shapes(workloads: list[Workload]) -> None:
    first = workloads[0]
    for workload in workloads[1:]:
        for name in SHAPE:
            if getattr(workload, name) != getattr(first, name):
                raise PropertyError(
                    f"{workload.name}: {name} differs from {first.name}'s; one session keeps "
                    "one record shape"
                )


async def run_session(
    url: str,
    headers: dict[str, str],
    workloads: list[Workload],
    owner: str,
    slot_us: int = DEFAULT_SLOT_US,
    seed: int = 1,
) -> Session:
    check_shapes(workloads)
    layout = plan_layout(workloads, slot_us, clock.now())
    session = Session(owner, layout, workloads)
    threads = max(w.threadcount for w in workloads)
    limits = httpx.Limits(max_connections=threads, max_keepalive_connections=threads)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60, limits=limits) as http:
        store = ShardlogStore(http, owner, workloads[0], layout)
        records = Records()
        session.phases.append(Phase("load", await load(store, workloads[0], records)))
        print(session.phases[-1].text, flush=True)
        for number, workload in enumerate(workloads):
            store.workload = workload
            measured = await run(store, workload, records, seed + number)
            session.phases.append(Phase(workload.name, measured))
            print(f"== {workload.name}\n{session.phases[-1].text}", flush=True)
        session.problems = store.problems
        session.records = records.count
    return session


def write_outputs(session: Session, mode: dict[str, Any]) -> list[Path]:
    """YCSB's text of every phase, and the JSON and plot of the whole session."""
    directory = harness.RESULTS / "ycsb"
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for phase in session.phases:
        path = directory / f"{phase.name}.txt"
        path.write_text(phase.text)
        written.append(path)
    first = session.workloads[0]
    payload = {
        "scale": {
            "recordcount": first.recordcount,
            "operationcount": {w.name: w.operationcount for w in session.workloads},
            "threadcount": first.threadcount,
            "records_at_end": session.records,
        },
        "owner": session.owner,
        "slot_us": session.layout.slot_us,
        "phases": {phase.name: phase.measurements.summary() for phase in session.phases},
        "problems": session.problems,
        "targets": {"failed_operations": harness.verdict(session.failed, 0)},
    }
    written.extend(
        harness.write_results("ycsb", payload, lambda figure: plot(figure, payload), mode=mode)
    )
    return written


def label(phase: str) -> str:
    """'workloada' -> 'A': the plot's axis holds seven phases."""
    return phase.removeprefix("workload").upper() if phase.startswith("workload") else phase


def plot(figure: Any, payload: dict[str, Any]) -> None:
    """Throughput per phase, and each operation's 95th percentile latency per phase (from the
    JSON payload alone, so a result file can be drawn again)."""
    throughput_axes, latency_axes = figure.subplots(1, 2)
    phases: dict[str, Any] = payload["phases"]
    names = [label(name) for name in phases]
    throughput_axes.bar(names, [phase["throughput_ops_s"] for phase in phases.values()])
    throughput_axes.set_ylabel("operations/s")
    throughput_axes.set_title(f"YCSB on shardlog, {payload['scale']['threadcount']} threads")
    operations = sorted({name for phase in phases.values() for name in phase["by_operation"]})
    series = {
        name: [
            phase["by_operation"][name]["p95th_us"] / 1000 if name in phase["by_operation"] else 0.0
            for phase in phases.values()
        ]
        for name in operations
    }
    harness.grouped_bars(latency_axes, names, series)
    latency_axes.set_ylabel("95th percentile latency, ms")
    latency_axes.set_title("latency by phase and operation")
    latency_axes.legend()
