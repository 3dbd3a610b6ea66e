"""Client load for fault experiments, shared by the tests that assert on it (tests/ha,
tests/compose, tests/hosts) and bench/failover that measures it: writers in background threads
posting batches through the router while something breaks, and the tally of what the shards hold
afterwards against what was acknowledged."""

from __future__ import annotations

import itertools
import ssl
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Self

import httpx
import orjson

from bench.shard_view import owner_id, query_owner
from router import clock
from services.faults import wait_until

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


def window() -> dict[str, str]:
    """A search window around now."""
    now = clock.now()
    return {
        "from": (now - timedelta(hours=1)).isoformat(),
        "to": (now + timedelta(minutes=10)).isoformat(),
    }


def audit_batch(owner: str, writer: int, number: int) -> tuple[list[str], bytes]:
    """One NDJSON batch of distinct rows, and their contents."""
    contents = [f"{owner}-{writer}-{number}-{i}" for i in range(BATCH_ROWS)]
    body = b"".join(orjson.dumps({"owner": owner, "content": c}) + b"\n" for c in contents)
    return contents, body


@dataclass
class BackgroundWriters:
    """``writers`` threads each running ``_write(writer)`` until the context exits."""

    base_url: str
    headers: dict[str, str] = field(default_factory=dict)  # the token's Authorization
    writers: int = 2
    # How an https router's certificate is verified (httpx's verify: a context with its CA).
    verify: ssl.SSLContext | bool = True
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _write(self, writer: int) -> None:
        raise NotImplementedError

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.base_url, timeout=180, headers=self.headers, verify=self.verify
        )

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def __enter__(self) -> Self:
        for writer in range(self.writers):
            thread = threading.Thread(target=self._write, args=(writer,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=240)


@dataclass
class KeyedLoad(BackgroundWriters):
    """Audit ingest as a careful client writes it: each batch has an Idempotency-Key and is
    retried with the same key until acknowledged (where a whole host or container goes away)."""

    owner: str = field(default_factory=lambda: f"kill-{uuid.uuid4().hex[:8]}")
    acknowledged: list[str] = field(default_factory=list)
    errors: int = 0

    def _write(self, writer: int) -> None:
        with self.client() as client:
            number = 0
            while not self.stopping:
                contents, body = audit_batch(self.owner, writer, number)
                headers = {
                    "content-type": "application/x-ndjson",
                    "idempotency-key": f"{self.owner}-{writer}-{number}",
                }
                deadline = time.monotonic() + 180
                while time.monotonic() < deadline:
                    try:
                        if client.post("/v1/audit", content=body, headers=headers).is_success:
                            with self._lock:
                                self.acknowledged += contents
                            break
                    except httpx.HTTPError:
                        pass
                    with self._lock:
                        self.errors += 1
                    time.sleep(0.5)
                number += 1

    def wait_for(self, rows: int, timeout: float) -> None:
        wait_until(lambda: len(self.acknowledged) >= rows, timeout, f"{rows} acknowledged rows")

    def assert_stored_exactly_once(self) -> None:
        """Every acknowledged row is in the owner's export, and none is in it twice."""
        with self.client() as client:
            exported = client.get("/v1/audit/export", params={"owner": self.owner, **window()})
        assert exported.status_code == 200, exported.text
        stored = Counter(orjson.loads(line)["content"] for line in exported.content.splitlines())
        doubled = [c for c, n in stored.items() if n > 1]
        missing = [c for c in self.acknowledged if c not in stored]
        assert not doubled, f"{len(doubled)} rows stored twice, e.g. {doubled[:3]}"
        assert not missing, f"{len(missing)} acknowledged rows missing, e.g. {missing[:3]}"


@dataclass
class IngestLoad(BackgroundWriters):
    """Audit writers that post batches back to back, without retries of their own (the
    router's retries are what is under test) and without an Idempotency-Key."""

    owner: str = field(default_factory=lambda: f"ha-{uuid.uuid4().hex[:10]}")
    outcomes: list[Outcome] = field(default_factory=list)

    def _write(self, writer: int) -> None:
        with self.client() as client:
            number = 0
            while not self.stopping:
                contents, body = audit_batch(self.owner, writer, number)
                started = time.monotonic()
                try:
                    response = client.post(
                        "/v1/audit", content=body, headers={"content-type": "application/x-ndjson"}
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


@dataclass
class FlowLoad(BackgroundWriters):
    """One writer posting batches of distinct flows (hash-placed: a batch for a failing shard
    cannot move, so the router waits out the failover)."""

    writers: int = 1
    switch: str = field(default_factory=lambda: f"ha-sw-{uuid.uuid4().hex[:8]}")
    outcomes: list[tuple[int, list[str]]] = field(default_factory=list)
    acknowledged_at: list[float] = field(default_factory=list)

    def _write(self, writer: int) -> None:
        with self.client() as client:
            number = 0
            while not self.stopping:
                # A batch's flows differ by source port; batches by source address (and writer).
                source = f"10.{writer}.{number >> 8 & 255}.{number & 255}"
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
                with self._lock:
                    self.outcomes.append((status, keys))
                    if status == 200:
                        self.acknowledged_at.append(time.monotonic())
                number += 1

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
