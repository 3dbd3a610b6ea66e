"""VictoriaLogs as a fixture of bench/storage: built from its Go module with this machine's Go
(cached outside the repository, never committed), started on loopback with a data directory
of its own, loaded through its JSON-lines ingestion, flushed and merged through its internal
endpoints, measured on disk and queried in LogsQL; stopped by its PID."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

from bench.harness import cpu_seconds
from bench.storage.corpus import Row

MODULE = "github.com/VictoriaMetrics/VictoriaLogs/app/victoria-logs"
VERSION = "v1.52.1"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "shardlog-bench"
BINARY = CACHE / "bin" / "victoria-logs"
BUILD_TIMEOUT_S = 1500
START_TIMEOUT_S = 60
MERGE_TIMEOUT_S = 300
LOAD_BATCH = 10_000


@dataclass(frozen=True)
class Build:
    """Where the binary is, or why there is none; how long this run spent building it."""

    binary: Path | None
    version: str
    seconds: float | None
    note: str

    def record(self) -> dict[str, Any]:
        return {
            "module": MODULE,
            "version": self.version,
            "built_now_s": None if self.seconds is None else round(self.seconds, 1),
            "note": self.note,
        }


def build() -> Build:
    """The cached binary, else `go install MODULE@VERSION` into the cache (timed)."""
    if BINARY.exists():
        return Build(BINARY, VERSION, None, f"cached build of {MODULE}@{VERSION}")
    if shutil.which("go") is None:
        return Build(None, VERSION, None, "not built: no Go toolchain on this machine")
    started = time.monotonic()
    env = {**os.environ, "GOBIN": str(BINARY.parent), "GOTOOLCHAIN": "local"}
    print(f"  building {MODULE}@{VERSION} (once; cached in {CACHE}) ...", flush=True)
    try:
        done = subprocess.run(
            ["go", "install", f"{MODULE}@{VERSION}"],
            env=env,
            cwd=tempfile.gettempdir(),
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Build(None, VERSION, None, f"not built: go install took over {BUILD_TIMEOUT_S} s")
    seconds = time.monotonic() - started
    if done.returncode != 0 or not BINARY.exists():
        return Build(None, VERSION, seconds, f"not built: {done.stderr.strip()[-400:]}")
    print(f"  built in {seconds:.0f} s", flush=True)
    return Build(BINARY, VERSION, seconds, f"built now from {MODULE}@{VERSION}")


def stamp(ts: datetime) -> str:
    return ts.isoformat().replace("+00:00", "Z")


def logsql_time(start: datetime, end: datetime) -> str:
    return f"_time:[{stamp(start)}, {stamp(end)})"


def substring(pattern: str) -> str:
    """LogsQL's substring filter on the message: case-sensitive, anywhere (strpos's match)."""
    return f"_msg:*{json.dumps(pattern)}*"


class VictoriaLogs:
    """One running VictoriaLogs on 127.0.0.1:``port`` with ``data`` as its storage."""

    def __init__(self, binary: Path, port: int, data: Path) -> None:
        self.binary = binary
        self.port = port
        self.data = data
        self.url = f"http://127.0.0.1:{port}"
        self.log = data.parent / f"{data.name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.http = httpx.Client(base_url=self.url, timeout=120)

    def start(self) -> None:
        shutil.rmtree(self.data, ignore_errors=True)
        self.data.mkdir(parents=True)
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    str(self.binary),
                    f"-storageDataPath={self.data}",
                    f"-httpListenAddr=127.0.0.1:{self.port}",
                    "-retentionPeriod=30d",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"victoria-logs exited: {self.log.read_text()[-600:]}")
            try:
                if self.http.get("/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"victoria-logs did not answer on {self.url}")

    def stop(self) -> None:
        self.http.close()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.data, ignore_errors=True)
        self.log.unlink(missing_ok=True)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def load(self, rows: list[Row]) -> float:
        """Every row through /insert/jsonline (the owner as the stream field), then a flush;
        the CPU seconds VictoriaLogs' process spent on it."""
        before = cpu_seconds(self.pid)
        for start in range(0, len(rows), LOAD_BATCH):
            body = "".join(
                json.dumps({"_msg": r.content, "_time": stamp(r.ts), "owner": r.owner}) + "\n"
                for r in rows[start : start + LOAD_BATCH]
            )
            answer = self.http.post(
                "/insert/jsonline",
                params={"_stream_fields": "owner", "_msg_field": "_msg", "_time_field": "_time"},
                content=body.encode(),
            )
            answer.raise_for_status()
        self.http.get("/internal/force_flush").raise_for_status()
        return cpu_seconds(self.pid) - before

    def merge(self) -> None:
        """A forced merge of every partition (it runs in the background: its log line says
        when it is done), then wait until the data directory's size settles."""
        self.http.get("/internal/force_merge").raise_for_status()
        deadline = time.monotonic() + MERGE_TIMEOUT_S
        while "forced merge for partition_prefix" not in self._finished_merges():
            if time.monotonic() > deadline:
                raise RuntimeError("victoria-logs: forced merge did not finish")
            time.sleep(0.2)
        last = -1
        while (size := self.bytes_on_disk()) != last and time.monotonic() < deadline:
            last = size
            time.sleep(1.0)

    def _finished_merges(self) -> str:
        lines = self.log.read_text(errors="replace").splitlines()
        return "\n".join(line for line in lines if "successfully finished" in line)

    def bytes_on_disk(self) -> int:
        """Every file under its data directory (data, indexes, stream metadata)."""
        total = 0
        for root, _dirs, files in os.walk(self.data):
            for name in files:
                try:
                    total += (Path(root) / name).stat().st_size
                except FileNotFoundError:
                    continue  # a part removed after a merge
        return total

    def query(self, logsql: str) -> list[dict[str, Any]]:
        answer = self.http.post("/select/logsql/query", data={"query": logsql})
        answer.raise_for_status()
        return [json.loads(line) for line in answer.text.splitlines() if line.strip()]


@contextmanager
def running(binary: Path, port: int, data: Path) -> Iterator[VictoriaLogs]:
    peer = VictoriaLogs(binary, port, data)
    try:
        peer.start()
        yield peer
    finally:
        peer.stop()
