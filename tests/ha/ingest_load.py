"""Continuous audit ingest through the router while a fault happens, and the check that every
acknowledged row is stored exactly once afterwards."""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

import httpx
import orjson

from tests.support import owner_id, query_owner

BATCH_ROWS = 200


@dataclass
class Outcome:
    status: int
    contents: list[str]
    seconds: float
    error: str | None = None


@dataclass
class IngestLoad:
    """Writers that post batches back to back, without retries of their own (the router's
    retries are what is under test) and without an Idempotency-Key."""

    base_url: str
    owner: str = field(default_factory=lambda: f"ha-{uuid.uuid4().hex[:10]}")
    writers: int = 2
    outcomes: list[Outcome] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _write(self, writer: int) -> None:
        with httpx.Client(base_url=self.base_url, timeout=180) as client:
            number = 0
            while not self._stop.is_set():
                contents = [f"{self.owner}-{writer}-{number}-{i}" for i in range(BATCH_ROWS)]
                body = b"".join(
                    orjson.dumps({"owner": self.owner, "content": c}) + b"\n" for c in contents
                )
                started = time.monotonic()
                try:
                    response = client.post(
                        "/v1/audit",
                        content=body,
                        headers={"content-type": "application/x-ndjson"},
                    )
                    outcome = Outcome(
                        response.status_code,
                        contents,
                        time.monotonic() - started,
                        None if response.status_code == 200 else response.text[:500],
                    )
                except httpx.HTTPError as exc:
                    outcome = Outcome(0, contents, time.monotonic() - started, repr(exc))
                with self._lock:
                    self.outcomes.append(outcome)
                number += 1

    def __enter__(self) -> IngestLoad:
        for writer in range(self.writers):
            thread = threading.Thread(target=self._write, args=(writer,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=240)

    def wait_for_batches(self, count: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.outcomes) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"only {len(self.outcomes)} batches within {timeout}s")
            time.sleep(0.1)

    @property
    def errors(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status != 200]

    def acknowledged(self) -> list[str]:
        return [c for o in self.outcomes if o.status == 200 for c in o.contents]

    def check_stored(self, api: httpx.Client) -> int:
        """Every acknowledged row once, no row twice; returns the number of rows stored."""
        ident = owner_id(api, "audit", self.owner)
        assert ident is not None
        stored = Counter(row[0] for row in query_owner(api, "audit", ident, "content"))
        twice = [c for c, n in stored.items() if n > 1]
        assert not twice, f"{len(twice)} rows stored more than once, e.g. {twice[:3]}"
        missing = [c for c in self.acknowledged() if c not in stored]
        assert not missing, f"{len(missing)} acknowledged rows missing, e.g. {missing[:3]}"
        return len(stored)


def writable(dsn: str) -> bool:
    """A read-write session opens through the multi-host DSN (the shard has a primary)."""
    result = subprocess.run(
        ["psql", "-X", "-qAt", "-d", dsn, "-c", "SELECT pg_is_in_recovery()"],
        capture_output=True,
        text=True,
        timeout=15,
        check=False,
        env={"PGCONNECT_TIMEOUT": "2", "PATH": "/usr/bin:/bin"},
    )
    return result.returncode == 0 and result.stdout.strip() == "f"


def wait_until(check: object, timeout: float, what: str) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():  # type: ignore[operator]
            return time.monotonic() - started
        time.sleep(0.2)
    raise AssertionError(f"{what} not within {timeout:.0f}s")


@dataclass
class FlowLoad:
    """One writer posting batches of distinct flows (hash-placed: a batch for a failing shard
    cannot move, so the router waits out the failover)."""

    base_url: str
    switch: str = field(default_factory=lambda: f"ha-sw-{uuid.uuid4().hex[:8]}")
    outcomes: list[tuple[int, list[int]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _write(self) -> None:
        with httpx.Client(base_url=self.base_url, timeout=180) as client:
            number = 0
            while not self._stop.is_set():
                ports = [number * 50 + i + 1 for i in range(50)]
                flows = [
                    {
                        "switch": self.switch,
                        "src_ip": "10.0.0.1",
                        "dst_ip": "10.0.0.2",
                        "src_port": port,
                        "dst_port": 443,
                        "proto": 6,
                        "bytes": 1000,
                        "packets": 1,
                    }
                    for port in ports
                ]
                try:
                    status = client.post("/v1/flows", json=flows).status_code
                except httpx.HTTPError:
                    status = 0
                self.outcomes.append((status, ports))
                number += 1

    def __enter__(self) -> FlowLoad:
        self._thread = threading.Thread(target=self._write, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=240)

    def check_stored(self, api: httpx.Client) -> None:
        assert all(status == 200 for status, _ in self.outcomes), self.outcomes[-3:]
        ident = owner_id(api, "flow", self.switch)
        assert ident is not None
        rows = query_owner(api, "flow", ident, "src_port, bytes, flow_count")
        stored = Counter(int(r[0]) for r in rows)
        assert all(n == 1 for n in stored.values())
        assert all(r[1:] == ["1000", "1"] for r in rows), "a flow was merged twice"
        sent = {p for _, ports in self.outcomes for p in ports}
        assert set(stored) == sent
