"""Continuous audit ingest through the router while a fault happens, and the check that every
acknowledged row is stored exactly once afterwards."""

from __future__ import annotations

import itertools
import os
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
    finished: float = field(default_factory=time.monotonic)


@dataclass
class Tally:
    stored: int
    missing: list[str]
    duplicated: list[str]


def auth_of(client: httpx.Client) -> dict[str, str]:
    """The Authorization header of a client that carries a token."""
    return {"authorization": client.headers["authorization"]}


@dataclass
class IngestLoad:
    """Writers that post batches back to back, without retries of their own (the router's
    retries are what is under test) and without an Idempotency-Key."""

    base_url: str
    headers: dict[str, str] = field(default_factory=dict)  # the token's Authorization
    owner: str = field(default_factory=lambda: f"ha-{uuid.uuid4().hex[:10]}")
    writers: int = 2
    outcomes: list[Outcome] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _write(self, writer: int) -> None:
        with httpx.Client(base_url=self.base_url, timeout=180, headers=self.headers) as client:
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

    def wait_for_batches(self, count: int, timeout: float = 60.0, required: bool = True) -> None:
        """Until ``count`` batches have completed; past ``timeout`` an AssertionError, or
        (not ``required``) simply return."""
        deadline = time.monotonic() + timeout
        while len(self.outcomes) < count:
            if time.monotonic() > deadline:
                if not required:
                    return
                raise AssertionError(f"only {len(self.outcomes)} batches within {timeout}s")
            time.sleep(0.1)

    def longest_stall(self) -> float:
        """The longest time between two acknowledgments, as the load's clients saw it."""
        done = sorted(o.finished for o in self.outcomes if o.status == 200)
        return max((b - a for a, b in itertools.pairwise(done)), default=0.0)

    @property
    def errors(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status != 200]

    def acknowledged(self) -> list[str]:
        return [c for o in self.outcomes if o.status == 200 for c in o.contents]

    def tally(self, api: httpx.Client) -> Tally:
        """What the shards hold of this load's rows, against what was acknowledged."""
        ident = owner_id(api, "audit", self.owner)
        stored = Counter(
            row[0] for row in (query_owner(api, "audit", ident, "content") if ident else [])
        )
        return Tally(
            stored=len(stored),
            missing=[c for c in self.acknowledged() if c not in stored],
            duplicated=[c for c, n in stored.items() if n > 1],
        )

    def check_stored(self, api: httpx.Client) -> int:
        """Every acknowledged row once, no row twice; returns the number of rows stored."""
        tally = self.tally(api)
        twice = tally.duplicated
        assert not twice, f"{len(twice)} rows stored more than once, e.g. {twice[:3]}"
        missing = tally.missing
        assert not missing, f"{len(missing)} acknowledged rows missing, e.g. {missing[:3]}"
        return tally.stored


def writable(dsn: str) -> bool:
    """A read-write session opens through the multi-host DSN (the shard has a primary)."""
    result = subprocess.run(
        ["psql", "-X", "-qAt", "-d", dsn, "-c", "SELECT pg_is_in_recovery()"],
        capture_output=True,
        text=True,
        timeout=15,
        check=False,
        # The password file the session's cluster wrote (tests/ha/conftest.py).
        env={
            "PGCONNECT_TIMEOUT": "2",
            "PATH": "/usr/bin:/bin",
            "PGPASSFILE": os.environ.get("PGPASSFILE", ""),
        },
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
    headers: dict[str, str] = field(default_factory=dict)  # the token's Authorization
    switch: str = field(default_factory=lambda: f"ha-sw-{uuid.uuid4().hex[:8]}")
    outcomes: list[tuple[int, list[str]]] = field(default_factory=list)
    acknowledged_at: list[float] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _write(self) -> None:
        with httpx.Client(base_url=self.base_url, timeout=180, headers=self.headers) as client:
            number = 0
            while not self._stop.is_set():
                # A batch's flows differ by source port; batches by source address.
                source = f"10.{number >> 16 & 255}.{number >> 8 & 255}.{number & 255}"
                keys = [f"{source}:{port}" for port in range(1, 51)]
                flows = [
                    {
                        "switch": self.switch,
                        "src_ip": source,
                        "dst_ip": "192.168.0.2",
                        "src_port": port,
                        "dst_port": 443,
                        "proto": 6,
                        "bytes": 1000,
                        "packets": 1,
                    }
                    for port in range(1, 51)
                ]
                try:
                    status = client.post("/v1/flows", json=flows).status_code
                except httpx.HTTPError:
                    status = 0
                self.outcomes.append((status, keys))
                if status == 200:
                    self.acknowledged_at.append(time.monotonic())
                number += 1

    def __enter__(self) -> FlowLoad:
        self._thread = threading.Thread(target=self._write, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=240)

    @property
    def errors(self) -> int:
        return sum(status != 200 for status, _ in self.outcomes)

    def longest_stall(self) -> float:
        return max((b - a for a, b in itertools.pairwise(self.acknowledged_at)), default=0.0)

    def tally(self, api: httpx.Client) -> Tally:
        """Flows are told apart by source address and port; one merged twice holds 2000
        bytes."""
        ident = owner_id(api, "flow", self.switch)
        columns = "host(src_ip) || ':' || src_port, bytes, flow_count"
        rows = query_owner(api, "flow", ident, columns) if ident else []
        stored = Counter(r[0] for r in rows)
        merged_twice = {r[0] for r in rows if r[1:] != ["1000", "1"]}
        acknowledged = {k for status, keys in self.outcomes if status == 200 for k in keys}
        return Tally(
            stored=len(stored),
            missing=sorted(acknowledged - set(stored)),
            duplicated=sorted({k for k, n in stored.items() if n > 1} | merged_twice),
        )

    def check_stored(self, api: httpx.Client) -> None:
        assert not self.errors, self.outcomes[-3:]
        tally = self.tally(api)
        assert not tally.duplicated, f"flows stored or merged twice: {tally.duplicated[:3]}"
        assert not tally.missing, f"acknowledged flows missing: {tally.missing[:3]}"
        sent = {k for _, keys in self.outcomes for k in keys}
        assert tally.stored == len(sent)
