"""bench/hostile: what hostile or merely huge bodies cost the router (issue 11). Writes
bench/results/hostile.{json,png}.

    python -m bench.hostile [--sizes 16,64,128] [--repeats 3]

Three measurements, each side by side in one run:
- refusal: an NDJSON body announcing N MiB whose first line never ends. Seconds until the 413
  arrives, against the seconds to send and check a body of N MiB of valid-looking lines whose
  last one is invalid (so nothing is written). Target: the refusal does not grow with N.
- parse: the same records as one JSON array and as NDJSON, N MiB each, the last record invalid:
  seconds until the 422 (every record parsed and checked), and the router's CPU seconds for
  it. Target: the router's CPU linear in N (16 -> 128 MiB: at most 1.3 x 8).
- liveness: /health/live latency while two 64 MiB arrays are parsed at once, against the same
  probe on an idle router. Target: p99 < 100 ms.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.harness import (
    auth_for,
    bench_cluster,
    bench_settings,
    cpu_seconds,
    grouped_bars,
    percentiles,
    verdict,
    write_results,
)
from bench.hostile import started_poster
from bench.stamps import mode_of
from router import clock

MIB = 2**20
RECORD = orjson.dumps(
    {"owner": "bench-hostile", "ts": clock.now().isoformat(), "content": "y" * 480}
)
INVALID = b'{"owner":"bench-hostile","content":5}'


def ndjson_body(mib: int) -> bytes:
    count = mib * MIB // (len(RECORD) + 1)
    return (RECORD + b"\n") * count + INVALID + b"\n"


def array_body(mib: int) -> bytes:
    count = mib * MIB // (len(RECORD) + 1)
    return b"[" + b",".join([RECORD] * count) + b"," + INVALID + b"]"


def post_seconds(
    url: str, body: bytes, media: str, expected: int, router_pid: int
) -> tuple[float, float]:
    """Wall seconds of the request, and the router's CPU seconds during it."""
    with httpx.Client(base_url=url, timeout=600, headers=auth_for(url)) as client:
        cpu = cpu_seconds(router_pid)
        started = time.perf_counter()
        response = client.post("/v1/audit", content=body, headers={"content-type": media})
        seconds = time.perf_counter() - started
        cpu = cpu_seconds(router_pid) - cpu
    if response.status_code != expected:
        raise RuntimeError(f"expected {expected}, got {response.status_code} {response.text[:200]}")
    return seconds, cpu


def refusal_seconds(url: str, mib: int) -> float:
    """Send an unending first line of an N MiB body until the router answers."""
    host, port = url.removeprefix("http://").split(":")
    auth = "".join(f"{k}: {v}\r\n" for k, v in auth_for(url).items())
    with socket.create_connection((host, int(port)), timeout=600) as sock:
        sock.sendall(
            f"POST /v1/audit HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/x-ndjson\r\n"
            f"{auth}content-length: {mib * MIB}\r\n\r\n".encode()
        )
        started = time.perf_counter()
        answer = bytearray()
        sender = threading.Thread(target=_send_line, args=(sock, mib * MIB), daemon=True)
        sender.start()
        while b"\r\n" not in answer:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
        seconds = time.perf_counter() - started
    status = int(bytes(answer).split(b" ", 2)[1])
    if status != 413:
        raise RuntimeError(f"expected 413, got {status}")
    return seconds


def _send_line(sock: socket.socket, total: int) -> None:
    chunk = b"x" * MIB
    try:
        sock.sendall(b'{"owner":"bench-hostile","content":"')
        for _ in range(total // MIB):
            sock.sendall(chunk)
    except OSError:
        pass  # the router answered and closed: what is measured


_POSTER = """
import json, sys, threading, httpx
url, path, auth = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
body = open(path, "rb").read()
print("ready", flush=True)
sys.stdin.readline()
def post():
    with httpx.Client(base_url=url, timeout=600, headers=auth) as client:
        print(client.post("/v1/audit", content=body).status_code, flush=True)
threads = [threading.Thread(target=post) for _ in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


def probe_latencies(url: str, work_dir: Path, loaded: bool, seconds: float = 4.0) -> list[float]:
    """/health/live every 20 ms; with ``loaded``, while another process posts two 64 MiB arrays
    at once (a process of its own, so building and sending them takes no turns from the probe)."""
    poster = None
    if loaded:
        body = work_dir / "array-64.json"
        body.write_bytes(array_body(64))
        poster = started_poster(_POSTER, url, str(body), json.dumps(auth_for(url)))
    latencies = []
    with httpx.Client(base_url=url, timeout=30, headers=auth_for(url)) as client:
        deadline = time.monotonic() + seconds
        while (poster.poll() is None) if poster else time.monotonic() < deadline:
            started = time.perf_counter()
            client.get("/health/live").raise_for_status()
            latencies.append(time.perf_counter() - started)
            time.sleep(0.02)
    if poster is not None:
        assert poster.stdout is not None
        answers = poster.stdout.read().split()
        if answers != ["422", "422"]:
            raise RuntimeError(f"loaded posts answered {answers}")
    return latencies


def run(sizes: list[int], repeats: int, data_dir: Path) -> dict[str, Any]:
    settings = bench_settings(data_dir, shards=2, groups=1)
    results: dict[str, Any] = {"refusal": [], "parse": [], "liveness": {}}
    # Every record of the largest body counts: the record cap is not what is measured.
    extra = {"SHARDLOG_INGEST__MAX_RECORDS": "10000000"}
    with bench_cluster(settings, router_extra_env=extra) as (_cluster, router):
        assert router is not None
        url, pid = router.url, router.pid()
        assert pid is not None
        for mib in sizes:
            ndjson, array = ndjson_body(mib), array_body(mib)
            refused = [refusal_seconds(url, mib) for _ in range(repeats)]
            valid = [
                post_seconds(url, ndjson, "application/x-ndjson", 422, pid) for _ in range(repeats)
            ]
            as_array = [
                post_seconds(url, array, "application/json", 422, pid) for _ in range(repeats)
            ]
            entry = {
                "mib": mib,
                "refusal_s": round(statistics.median(refused), 4),
                "ndjson_s": round(statistics.median(w for w, _ in valid), 4),
                "array_s": round(statistics.median(w for w, _ in as_array), 4),
                "ndjson_router_cpu_s": round(statistics.median(c for _, c in valid), 4),
                "array_router_cpu_s": round(statistics.median(c for _, c in as_array), 4),
            }
            entry["refusal_vs_ndjson"] = round(entry["refusal_s"] / entry["ndjson_s"], 4)
            entry["array_vs_ndjson"] = round(entry["array_s"] / entry["ndjson_s"], 3)
            print(
                f"{mib:4d} MiB: unending line refused in {entry['refusal_s']:.3f} s; "
                f"NDJSON {entry['ndjson_s']:.2f} s, array {entry['array_s']:.2f} s "
                f"({entry['array_vs_ndjson']:.2f}x)"
            )
            results["parse"].append(entry)
        idle = percentiles(probe_latencies(url, data_dir, loaded=False))
        loaded = percentiles(probe_latencies(url, data_dir, loaded=True))
        results["liveness"] = {"idle": idle, "two_64mib_arrays": loaded, "target_p99_ms": 100}
        print(f"/health/live idle {idle}; under two 64 MiB arrays {loaded}")
    first, last = results["parse"][0], results["parse"][-1]
    growth = last["mib"] / first["mib"]
    results["linearity"] = {
        "size_ratio": growth,
        "ndjson_time_ratio": round(last["ndjson_s"] / first["ndjson_s"], 2),
        "array_time_ratio": round(last["array_s"] / first["array_s"], 2),
        "ndjson_router_cpu_ratio": round(
            last["ndjson_router_cpu_s"] / first["ndjson_router_cpu_s"], 2
        ),
        "array_router_cpu_ratio": round(
            last["array_router_cpu_s"] / first["array_router_cpu_s"], 2
        ),
        "refusal_time_ratio": round(last["refusal_s"] / first["refusal_s"], 2),
    }
    shortfalls = []
    if loaded["p99_ms"] >= 100:
        shortfalls.append(f"liveness p99 {loaded['p99_ms']} ms >= 100 ms")
    # The router's CPU is what a body costs it; wall time also holds the client's sending and
    # the machine's other load.
    for form in ("ndjson", "array"):
        if results["linearity"][f"{form}_router_cpu_ratio"] > growth * 1.3:
            shortfalls.append(f"{form} costs grow faster than the body: {results['linearity']}")
    results["shortfalls"] = shortfalls
    results["targets"] = {
        "liveness_p99_ms": verdict(loaded["p99_ms"], 100),
        **{
            f"{form}_router_cpu_growth": verdict(
                results["linearity"][f"{form}_router_cpu_ratio"], round(growth * 1.3, 2)
            )
            for form in ("ndjson", "array")
        },
    }
    print("targets met" if not shortfalls else f"SHORTFALL: {'; '.join(shortfalls)}")
    return results


def plot(results: dict[str, Any]) -> Any:
    def draw(figure: Any) -> None:
        left, right = figure.subplots(1, 2)
        sizes = [e["mib"] for e in results["parse"]]
        for key, label in (
            ("ndjson_s", "NDJSON, every record checked"),
            ("array_s", "JSON array, every record checked"),
            ("refusal_s", "unending line: until the 413"),
        ):
            left.plot(sizes, [e[key] for e in results["parse"]], marker="o", label=label)
        left.set_xlabel("body (MiB)")
        left.set_ylabel("seconds (median)")
        left.set_title("Cost of a body by its size")
        left.legend()
        live = results["liveness"]
        names = ["idle", "two_64mib_arrays"]
        metrics = ("p50_ms", "p99_ms", "max_ms")
        series = {metric: [live[n][metric] for n in names] for metric in metrics}
        grouped_bars(right, ["idle", "two 64 MiB arrays"], series)
        right.axhline(100, color="red", linestyle="--", label="target p99")
        right.set_ylabel("/health/live latency (ms)")
        right.set_title("Liveness while large bodies are parsed")
        right.legend()

    return draw


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile")
    parser.add_argument("--sizes", default="16,64,128")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=Path("var/bench-hostile"))
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results = run(sizes, args.repeats, args.data_dir)
    json_path, png_path = write_results(
        "hostile",
        {"sizes_mib": sizes, "repeats": args.repeats, **results},
        plot(results),
        mode=mode_of(parser, args),
    )
    print(f"wrote {json_path} and {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
