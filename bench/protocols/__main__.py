"""bench/protocols: the same audit rows sent through each way in, in one run: shardlog's
NDJSON (POST /v1/audit), Elasticsearch _bulk, Loki push (protobuf + snappy), OTLP/HTTP logs
(protobuf) and syslog over TCP (RFC 5424, octet-counted, to `shardlog syslog`). Rows/s of each
and its ratio to NDJSON's (target >= 0.7 for each).

Every HTTP request is acknowledged after its rows committed, so a run ends with its last
answer; syslog has no acknowledgement, so its run ends when the listener's accepted counter
has counted every message (committed: the listener counts a batch once it is written). The
protocols take turns within each repeat (the order rotated), and each repeat's ratios are
taken against that repeat's NDJSON run; medians. Each run's rows differ from every other run's
(their timestamps move by a microsecond a repeat), so a protocol that keys retries by the
body stores every run. The router's and the listener's counters must account for every row.
Writes bench/results/protocols.{json,png}.

    python -m bench.protocols [--rows 60000] [--batch 1000] [--clients 4] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench import cluster_run
from bench.harness import (
    Progress,
    auth_for,
    bench_cluster,
    bench_settings,
    syslog_listener,
    verdict,
    write_results,
)
from bench.ingest.generate import audit_records
from bench.protocols.bodies import ENCODERS, HTTP, Record, batches
from bench.stamps import mode_of
from services.syslog_process import SyslogProcess

NAME = "protocols"
TARGET = 0.7
OWNERS = [f"bench-proto-{n}" for n in range(8)]
CONFIRM_TIMEOUT_S = 300.0


def shifted(records: list[Record], microseconds: int) -> list[Record]:
    step = timedelta(microseconds=microseconds)
    return [{**r, "ts": (datetime.fromisoformat(r["ts"]) + step).isoformat()} for r in records]


def accepted(metrics_text: str, protocol: str) -> int:
    for family in text_string_to_metric_families(metrics_text):
        if family.name != "shardlog_protocol_messages":
            continue
        for sample in family.samples:
            labels = sample.labels
            if (
                sample.name.endswith("_total")
                and labels.get("protocol") == protocol
                and labels.get("outcome") == "accepted"
            ):
                return int(sample.value)
    return 0


def _answered(protocol: str, response: httpx.Response) -> str | None:
    """Why an answer is not a full success (None: every row taken)."""
    expected = 204 if protocol == "loki" else 200
    if response.status_code != expected:
        return f"{response.status_code} {response.text[:300]}"
    if protocol == "es_bulk" and response.json().get("errors"):
        return f"_bulk item errors: {response.text[:300]}"
    if protocol == "otlp" and response.content:
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
            ExportLogsServiceResponse,
        )

        answer = ExportLogsServiceResponse.FromString(response.content)
        if answer.partial_success.rejected_log_records:
            return f"OTLP rejected {answer.partial_success.rejected_log_records} records"
    return None


async def post_all(url: str, protocol: str, bodies: list[bytes], clients: int) -> None:
    path, headers = HTTP[protocol]

    async def client(mine: list[bytes]) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=300, headers=auth_for(url)) as http:
            for body in mine:
                problem = _answered(protocol, await http.post(path, content=body, headers=headers))
                if problem is not None:
                    raise RuntimeError(f"{protocol}: {problem}")

    await asyncio.gather(*(client(bodies[i::clients]) for i in range(clients)))


async def stream_all(port: int, metrics_url: str, streams: list[bytes], rows: int) -> None:
    """Every stream on a TCP connection of its own, then wait for the listener to count
    ``rows`` more messages accepted."""
    async with httpx.AsyncClient(timeout=30) as http:
        before = accepted((await http.get(metrics_url)).text, "syslog")

        async def one(stream: bytes) -> None:
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(stream)
            await writer.drain()
            writer.close()
            await writer.wait_closed()

        await asyncio.gather(*(one(stream) for stream in streams))
        deadline = time.monotonic() + CONFIRM_TIMEOUT_S
        while accepted((await http.get(metrics_url)).text, "syslog") < before + rows:
            if time.monotonic() > deadline:
                raise RuntimeError(f"syslog: not every message counted in {CONFIRM_TIMEOUT_S}s")
            await asyncio.sleep(0.02)


class Ways:
    """Sends one run of rows through a protocol; seconds it took."""

    def __init__(self, router_url: str, syslog: SyslogProcess, syslog_port: int) -> None:
        self.router_url = router_url
        self.syslog = syslog
        self.syslog_port = syslog_port

    def run(self, protocol: str, records: list[Record], batch: int, clients: int) -> float:
        encode = ENCODERS[protocol]
        if protocol == "syslog":
            shares = [records[i::clients] for i in range(clients)]
            streams = [encode(share) for share in shares]
            began = time.perf_counter()
            asyncio.run(
                stream_all(
                    self.syslog_port, f"{self.syslog.metrics_url}/metrics", streams, len(records)
                )
            )
        else:
            bodies = batches(records, batch, encode)
            began = time.perf_counter()
            asyncio.run(post_all(self.router_url, protocol, bodies, clients))
        return time.perf_counter() - began

    def counted(self) -> dict[str, int]:
        """Accepted messages by protocol, from the router's and the listener's counters."""
        router = httpx.get(f"{self.router_url}/metrics", timeout=30).text
        listener = httpx.get(f"{self.syslog.metrics_url}/metrics", timeout=30).text
        counts = {p: accepted(router, p) for p in HTTP if p != "ndjson"}
        counts["syslog"] = accepted(listener, "syslog")
        return counts


def measure(settings: Any, args: argparse.Namespace) -> dict[str, Any]:
    records = audit_records(args.rows, OWNERS, seed=19)
    protocols = args.protocols
    seconds: dict[str, list[float]] = {p: [] for p in protocols}
    with bench_cluster(settings) as (_cluster, router):
        assert router is not None
        home = args.data_dir.absolute() / "syslog-bench"
        with syslog_listener(settings, home, args.syslog_port, router.url) as listener:
            ways = Ways(router.url, listener, args.syslog_port)
            # Warm-up: every owner's day tables exist, every path has run once.
            for protocol in protocols:
                ways.run(protocol, shifted(records[: args.batch], 10_000), args.batch, 1)
            progress = Progress("runs", args.repeats * len(protocols), unit="runs", every_s=0)
            for repeat in range(args.repeats):
                rows = shifted(records, repeat + 1)
                turn = repeat % len(protocols)
                for protocol in protocols[turn:] + protocols[:turn]:
                    seconds[protocol].append(ways.run(protocol, rows, args.batch, args.clients))
                    progress.advance()
            counted = {p: n for p, n in ways.counted().items() if p in protocols}
    expected = (args.repeats * args.rows) + min(args.batch, args.rows)
    return {"seconds": seconds, "counted": counted, "expected_per_protocol": expected}


def summarise(measured: dict[str, Any], rows: int) -> dict[str, Any]:
    seconds = measured["seconds"]
    native = seconds["ndjson"]
    summary: dict[str, Any] = {}
    for protocol, runs in seconds.items():
        ratios = [round(n / s, 3) for s, n in zip(runs, native, strict=True)]
        summary[protocol] = {
            "rows_per_s_runs": [round(rows / s) for s in runs],
            "rows_per_s": round(rows / statistics.median(runs)),
            "ratios_to_ndjson": ratios,
            "ratio_to_ndjson": round(statistics.median(ratios), 3),
        }
    return summary


def plot(payload: dict[str, Any]) -> Any:
    def draw(figure: Any) -> None:
        axes = figure.subplots(1, 1)
        summary = payload["summary"]
        names = list(summary)
        axes.bar(names, [summary[n]["rows_per_s"] for n in names])
        native = summary["ndjson"]["rows_per_s"]
        axes.axhline(TARGET * native, linestyle="--", color="grey", label=f"{TARGET}x NDJSON")
        for index, name in enumerate(names):
            axes.annotate(
                f"{summary[name]['ratio_to_ndjson']}x",
                (index, summary[name]["rows_per_s"]),
                ha="center",
                va="bottom",
            )
        params = payload["params"]
        axes.set_ylabel("audit rows/s (median)")
        axes.set_title(
            f"{params['rows']:,} rows of 512 characters, {params['batch']:,} a request, "
            f"{params['clients']} clients (syslog: {params['clients']} TCP streams)"
        )
        axes.legend()

    return draw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.protocols")
    parser.add_argument("--rows", type=int, default=60_000, help="rows a run")
    parser.add_argument("--batch", type=int, default=1_000, help="rows a request")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--shards", type=int, default=12)
    parser.add_argument(
        "--protocols",
        type=lambda text: ["ndjson", *(p for p in text.split(",") if p and p != "ndjson")],
        default=list(ENCODERS),
        help="comma-separated, of " + ", ".join(ENCODERS) + " (ndjson always runs)",
    )
    parser.add_argument("--syslog-port", type=int, default=0, help="default: router port + 30")
    cluster_run.add_cluster_flags(parser, "var/bench-protocols")
    args = parser.parse_args(argv)
    args.syslog_port = args.syslog_port or args.router_port + 30
    settings = bench_settings(
        args.data_dir, shards=args.shards, base_port=args.base_port, router_port=args.router_port
    )
    try:
        measured = measure(settings, args)
    finally:
        if not args.keep:
            shutil.rmtree(args.data_dir, ignore_errors=True)
    summary = summarise(measured, args.rows)
    expected = measured["expected_per_protocol"]
    missing = {p: n for p, n in measured["counted"].items() if n != expected}
    targets = {
        f"{p}_over_ndjson": verdict(s["ratio_to_ndjson"], TARGET, at_most=False)
        for p, s in summary.items()
        if p != "ndjson"
    }
    # No directory of this machine in the result: the data directory is left out.
    params = {k: v for k, v in vars(args).items() if not isinstance(v, Path)}
    payload = {
        "params": params,
        "summary": summary,
        "targets": targets,
        "counted": measured["counted"],
        "expected_per_protocol": expected,
        "seconds": measured["seconds"],
    }
    for protocol, s in summary.items():
        print(
            f"  {protocol}: {s['rows_per_s']:,} rows/s (runs {s['rows_per_s_runs']}), "
            f"{s['ratio_to_ndjson']}x NDJSON",
            flush=True,
        )
    for name, target in targets.items():
        if not target["met"]:
            print(f"  SHORTFALL: {name} {target['value']} < {TARGET}", flush=True)
    json_path, png_path = write_results(NAME, payload, plot(payload), mode=mode_of(parser, args))
    print(f"  wrote {json_path} and {png_path}")
    if missing:
        print(f"  FAILED: accepted counts differ from {expected:,}: {missing}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
