"""bench/hostile/decoders: what amplified bodies and idle syslog connections cost (issue #35).
Writes bench/results/hostile-decoders.{json,png}.

    python -m bench.hostile.decoders [--quick] [--mib 240] [--rounds 5] [--connections 10000]

Two measurements, each while /health/live (and the listener's /health) is probed every 20 ms
and the process's resident memory is sampled:
- decoders: four amplified bodies at once, each decoded by another decoder: a Loki push of one
  ``mib`` MiB line in a snappy block, an OTLP export of one such record gzip'd and another
  deflated, and a plain protobuf OTLP export of ``mib`` MiB of records with 2,000 attributes
  each (objects several times its size); ``rounds`` times after one round unmeasured (a
  route's first request pays for imports). Target: the router's RSS grows by no more than its
  in-flight budget (what it keeps afterwards is reported); /health/live p99 < 100 ms.
- syslog: ``connections`` idle TCP connections opened to `shardlog syslog` and held, each from
  a loopback address of its own (all mapped senders), so that the listener's cap in all
  (`SHARDLOG_SYSLOG__MAX_CONNECTIONS`, 4,096) is what holds them back: those over it are
  closed at once (counted). Target: the listener's /health and the router's /health/live
  p99 < 100 ms, the listener's RSS growth at most 64 MiB (under 7 KiB a connection).

--quick (what CI and a shared machine run): 24 MiB bodies under a 64 MiB budget and a 32 MiB
body limit, 3 rounds, 2,000 connections. Ports: --base-port, --router-port, --syslog-port.
"""

from __future__ import annotations

import argparse
import gzip
import json
import resource
import socket
import statistics
import sys
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cramjam
import httpx
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from bench.harness import (
    auth_for,
    bench_cluster,
    bench_settings,
    percentiles,
    syslog_listener,
    verdict,
    write_results,
)
from bench.hostile import started_poster
from bench.stamps import mode_of
from router import clock
from router.auth.scopes import SYSTEM_TENANT
from router.protocols import loki
from services.syslog_process import SyslogProcess

MIB = 2**20
PROBE_EVERY_S = 0.02
ATTRIBUTES_PER_RECORD = 2_000
LISTENER_GROWTH_TARGET_MIB = 64
HEALTH_P99_TARGET_MS = 100


def _now_nanos() -> int:
    return int(clock.time() * 10**9) - 60 * 10**9


def loki_line(mib: int) -> bytes:
    request = loki.PushRequest()
    stream = request.streams.add(labels='{owner="bench-decoders"}')
    entry = stream.entries.add(line="x" * (mib * MIB))
    entry.timestamp.seconds = _now_nanos() // 10**9
    return bytes(cramjam.snappy.compress_raw(request.SerializeToString()))


def otlp_request() -> tuple[ExportLogsServiceRequest, Any]:
    request = ExportLogsServiceRequest()
    resource_logs = request.resource_logs.add()
    resource_logs.resource.attributes.add(key="service.name").value.string_value = "bench-dec"
    return request, resource_logs.scope_logs.add()


def otlp_long_record(mib: int) -> bytes:
    request, scope = otlp_request()
    scope.log_records.add(time_unix_nano=_now_nanos()).body.string_value = "y" * (mib * MIB)
    return bytes(request.SerializeToString())


def otlp_many_attributes(mib: int) -> bytes:
    """Records whose attrs are too long (each is refused on its own, nothing written), each
    decoded into a few hundred KiB of objects first."""
    record = otlp_request()[1].log_records.add(time_unix_nano=_now_nanos())
    for key in range(ATTRIBUTES_PER_RECORD):
        record.attributes.add(key=f"attribute-{key}").value.int_value = key
    one = record.SerializeToString()
    request, scope = otlp_request()
    for _ in range(mib * MIB // len(one)):
        scope.log_records.add().CopyFrom(record)
    return bytes(request.SerializeToString())


def amplified_bodies(mib: int) -> dict[str, tuple[str, dict[str, str], bytes]]:
    """name -> (path, headers, body)."""
    protobuf = {"content-type": "application/x-protobuf"}
    long_record = otlp_long_record(mib)
    return {
        "snappy": ("/loki/api/v1/push", protobuf, loki_line(mib)),
        "gzip": ("/v1/logs", {**protobuf, "content-encoding": "gzip"}, gzip.compress(long_record)),
        "deflate": (
            "/v1/logs",
            {**protobuf, "content-encoding": "deflate"},
            zlib.compress(long_record),
        ),
        "protobuf": ("/v1/logs", protobuf, otlp_many_attributes(mib)),
    }


_POSTER = """
import json, sys, threading, httpx
url, auth, requests = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
rounds = int(sys.argv[4])
bodies = {name: (path, headers, open(file, "rb").read())
          for name, (path, headers, file) in requests.items()}
print("ready", flush=True)
sys.stdin.readline()
def post(name, answers):
    path, headers, body = bodies[name]
    with httpx.Client(base_url=url, timeout=600, headers=auth) as client:
        answers[name] = client.post(path, content=body, headers=headers).status_code
rounds_answers = []
for _ in range(rounds):
    answers = {}
    threads = [threading.Thread(target=post, args=(name, answers)) for name in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rounds_answers.append(answers)
print(json.dumps(rounds_answers), flush=True)
"""


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


class Probe:
    """/health every 20 ms at each URL, and the RSS of ``pid``, until ``done()``."""

    def __init__(self, urls: dict[str, str], pid: int) -> None:
        self.urls, self.pid = urls, pid
        self.latencies: dict[str, list[float]] = {name: [] for name in urls}
        self.rss: list[float] = []

    def run(self, done: Callable[[], bool]) -> None:
        with httpx.Client(timeout=30) as client:
            while not done():
                for name, url in self.urls.items():
                    started = time.perf_counter()
                    client.get(url).raise_for_status()
                    self.latencies[name].append(time.perf_counter() - started)
                self.rss.append(rss_mib(self.pid))
                time.sleep(PROBE_EVERY_S)

    def for_seconds(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        self.run(lambda: time.monotonic() >= deadline)


def posted(url: str, requests: dict[str, Any], rounds: int, probe: Probe) -> list[Any]:
    """The four bodies posted at once, ``rounds`` times, while ``probe`` runs: the answers."""
    arguments = (url, json.dumps(auth_for(url)), json.dumps(requests), str(rounds))
    poster = started_poster(_POSTER, *arguments)
    probe.run(lambda: poster.poll() is not None)
    assert poster.stdout is not None
    answers: list[Any] = json.loads(poster.stdout.read())
    return answers


def decoders_phase(url: str, pid: int, mib: int, rounds: int, work_dir: Path) -> dict[str, Any]:
    bodies = amplified_bodies(mib)
    requests = {}
    for name, (path, headers, body) in bodies.items():
        file = work_dir / f"amplified-{name}.bin"
        file.write_bytes(body)
        requests[name] = (path, headers, str(file))
    sizes = {name: len(body) for name, (_, _, body) in bodies.items()}
    del bodies
    health = {"router": f"{url}/health/live"}
    # A first round unmeasured: a route's first request pays for imports and first uses.
    warm_up = posted(url, requests, 1, Probe(health, pid))
    idle = Probe(health, pid)
    idle.for_seconds(2.0)
    loaded = Probe(health, pid)
    answers = posted(url, requests, rounds, loaded)
    after = Probe(health, pid)
    after.for_seconds(2.0)
    before_mib = statistics.median(idle.rss)
    return {
        "body_mib": mib,
        "rounds": rounds,
        "sent_bytes": sizes,
        "warm_up_answers": warm_up[0],
        "answers": answers,
        "rss_idle_mib": round(before_mib, 1),
        "rss_peak_growth_mib": round(max(loaded.rss + after.rss) - before_mib, 1),
        "rss_kept_mib": round(after.rss[-1] - before_mib, 1),
        "health_idle": percentiles(idle.latencies["router"]),
        "health_loaded": percentiles(loaded.latencies["router"]),
    }


# Idle senders come from addresses of their own (127.1.0.1 and up, mapped to the system tenant
# with the rest of 127.0.0.0/8), so that the listener's cap in all is met, not one source's.
IDLE_SOURCES = "127.0.0.0/8"


def idle_source(n: int) -> str:
    return f"127.1.{n // 250}.{n % 250 + 1}"


def open_idle(port: int, count: int) -> list[socket.socket]:
    """Up to ``count`` connections that send nothing, each from an address of its own (the
    listener closes those over its cap: they are counted by ``still_open``)."""
    held = []
    for n in range(count):
        try:
            held.append(
                socket.create_connection(
                    ("127.0.0.1", port), timeout=5, source_address=(idle_source(n), 0)
                )
            )
        except OSError:
            break
    return held


def refused_connections(listener: SyslogProcess) -> int:
    """Connections the listener closed as soon as accepted, over its caps (its metric)."""
    text = httpx.get(f"{listener.metrics_url}/metrics", timeout=10).text
    prefix = "shardlog_syslog_refused_connections_total{"
    return round(
        sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(prefix))
    )


def still_open(held: list[socket.socket]) -> int:
    """Connections the listener has not closed (a closed one reads as end of stream)."""
    count = 0
    for sock in held:
        sock.setblocking(False)
        try:
            count += sock.recv(1) != b""
        except BlockingIOError:
            count += 1
        except OSError:
            pass
    return count


def syslog_phase(url: str, listener: SyslogProcess, port: int, count: int) -> dict[str, Any]:
    pid = listener.pid()
    assert pid is not None
    health = {"router": f"{url}/health/live", "listener": f"{listener.metrics_url}/health"}
    idle = Probe(health, pid)
    idle.for_seconds(2.0)
    started = time.perf_counter()
    held = open_idle(port, count)
    opened_s = time.perf_counter() - started
    loaded = Probe(health, pid)
    loaded.for_seconds(5.0)
    open_after = still_open(held)
    refused = refused_connections(listener)
    for sock in held:
        sock.close()
    before_mib = statistics.median(idle.rss)
    return {
        "connections": count,
        "opened": len(held),
        "open_seconds": round(opened_s, 2),
        "still_open_after_5s": open_after,
        "refused_by_the_caps": refused,
        "listener_rss_idle_mib": round(before_mib, 1),
        "listener_rss_growth_mib": round(max(loaded.rss) - before_mib, 1),
        "health_idle": {name: percentiles(v) for name, v in idle.latencies.items()},
        "health_loaded": {name: percentiles(v) for name, v in loaded.latencies.items()},
    }


def raise_open_files(wanted: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def judged(results: dict[str, Any], budget_mib: int) -> dict[str, Any]:
    decoders, syslog = results["decoders"], results["syslog"]
    return {
        "decoders_rss_growth_mib": verdict(decoders["rss_peak_growth_mib"], budget_mib),
        "decoders_health_p99_ms": verdict(
            decoders["health_loaded"]["p99_ms"], HEALTH_P99_TARGET_MS
        ),
        "syslog_listener_rss_growth_mib": verdict(
            syslog["listener_rss_growth_mib"], LISTENER_GROWTH_TARGET_MIB
        ),
        **{
            f"syslog_{name}_health_p99_ms": verdict(value["p99_ms"], HEALTH_P99_TARGET_MS)
            for name, value in syslog["health_loaded"].items()
        },
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = bench_settings(
        args.data_dir, shards=2, groups=1, base_port=args.base_port, router_port=args.router_port
    )
    extra = {
        "SHARDLOG_INGEST__INFLIGHT_BUDGET_BYTES": str(args.budget_mib * MIB),
        "SHARDLOG_INGEST__MAX_BODY_BYTES": str(args.max_body_mib * MIB),
    }
    open_files = raise_open_files(args.connections + 1024)
    with bench_cluster(settings, router_extra_env=extra) as (_cluster, router):
        assert router is not None and router.pid() is not None
        pid = router.pid() or 0
        decoders = decoders_phase(router.url, pid, args.mib, args.rounds, args.data_dir)
        print(f"decoders: {decoders}")
        home = args.data_dir.absolute() / "syslog-idle"
        mapped = httpx.put(
            f"{router.url}/v1/admin/syslog-senders/{IDLE_SOURCES}",
            json={"tenant": SYSTEM_TENANT},
            headers=auth_for(router.url),
            timeout=30,
        )
        mapped.raise_for_status()
        with syslog_listener(settings, home, args.syslog_port, router.url) as listener:
            syslog = syslog_phase(router.url, listener, args.syslog_port, args.connections)
        print(f"syslog: {syslog}")
    results = {"decoders": decoders, "syslog": syslog, "client_open_files": open_files}
    results["targets"] = judged(results, args.budget_mib)
    return results


def plot(results: dict[str, Any]) -> Callable[[Any], None]:
    def draw(figure: Any) -> None:
        left, right = figure.subplots(1, 2)
        decoders, syslog = results["decoders"], results["syslog"]
        names = ["idle", "peak growth", "kept"]
        values = [
            decoders["rss_idle_mib"],
            decoders["rss_peak_growth_mib"],
            decoders["rss_kept_mib"],
        ]
        left.bar(names, values, color=["grey", "tab:orange", "tab:blue"])
        left.axhline(results["budget_mib"], color="red", linestyle="--", label="in-flight budget")
        left.set_ylabel("router RSS (MiB)")
        answers = sorted({f"{n} {s}" for round_ in decoders["answers"] for n, s in round_.items()})
        left.set_title(f"4 amplified {decoders['body_mib']} MiB bodies x {decoders['rounds']}")
        left.text(0.02, 0.95, "\n".join(answers), transform=left.transAxes, va="top", fontsize=8)
        left.legend()
        labels = ["decoders: router", "syslog: router", "syslog: listener"]
        p99 = [
            decoders["health_loaded"]["p99_ms"],
            syslog["health_loaded"]["router"]["p99_ms"],
            syslog["health_loaded"]["listener"]["p99_ms"],
        ]
        right.bar(labels, p99)
        right.axhline(HEALTH_P99_TARGET_MS, color="red", linestyle="--", label="target p99")
        right.set_ylabel("/health p99 (ms)")
        right.set_title(
            f"{syslog['opened']} idle syslog connections: listener RSS "
            f"+{syslog['listener_rss_growth_mib']} MiB"
        )
        right.legend()

    return draw


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile.decoders")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--mib", type=int, default=240)
    parser.add_argument("--budget-mib", type=int, default=512)
    parser.add_argument("--max-body-mib", type=int, default=256)
    parser.add_argument("--connections", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--base-port", type=int, default=29410)
    parser.add_argument("--router-port", type=int, default=29490)
    parser.add_argument("--syslog-port", type=int, default=29495)
    parser.add_argument("--data-dir", type=Path, default=Path("var/bench-hostile-decoders"))
    args = parser.parse_args()
    if args.quick:
        args.mib, args.budget_mib, args.max_body_mib, args.connections = 24, 64, 32, 2_000
        args.rounds = 3
    args.data_dir.mkdir(parents=True, exist_ok=True)
    results = run(args)
    payload = {"budget_mib": args.budget_mib, **results}
    results["budget_mib"] = args.budget_mib
    shortfalls = [
        f"{name} {judged_['value']} > {judged_['target']}"
        for name, judged_ in results["targets"].items()
        if not judged_["met"]
    ]
    payload["shortfalls"] = shortfalls
    print("targets met" if not shortfalls else f"SHORTFALL: {'; '.join(shortfalls)}")
    json_path, png_path = write_results(
        "hostile-decoders", payload, plot(results), mode=mode_of(parser, args)
    )
    print(f"wrote {json_path} and {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
