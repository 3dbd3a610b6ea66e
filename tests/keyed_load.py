"""Continuous audit ingest as a careful client writes it: each 200-row batch has an
Idempotency-Key and is retried with the same key until acknowledged. Afterwards an export shows
whether every acknowledged row is stored exactly once. Used where a whole host or container goes
away (the compose and the Ansible hosts tests)."""

from __future__ import annotations

import ssl
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import httpx
import orjson

BATCH_ROWS = 200


def window() -> dict[str, str]:
    """A search window around now."""
    now = datetime.now(UTC)
    return {
        "from": (now - timedelta(hours=1)).isoformat(),
        "to": (now + timedelta(minutes=10)).isoformat(),
    }


@dataclass
class KeyedLoad:
    base_url: str
    owner: str = field(default_factory=lambda: f"kill-{uuid.uuid4().hex[:8]}")
    writers: int = 2
    # Sent with every request (an API token's Authorization header).
    headers: dict[str, str] = field(default_factory=dict)
    # How an https router's certificate is verified (httpx's verify: a context with its CA).
    verify: ssl.SSLContext | bool = True
    acknowledged: list[str] = field(default_factory=list)
    errors: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _write(self, writer: int) -> None:
        with self._client() as client:
            number = 0
            while not self._stop.is_set():
                contents = [f"{self.owner}-{writer}-{number}-{i}" for i in range(BATCH_ROWS)]
                body = b"".join(
                    orjson.dumps({"owner": self.owner, "content": c}) + b"\n" for c in contents
                )
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

    def _client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.base_url, timeout=120, headers=self.headers, verify=self.verify
        )

    def __enter__(self) -> KeyedLoad:
        for writer in range(self.writers):
            thread = threading.Thread(target=self._write, args=(writer,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=240)

    def wait_for(self, rows: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acknowledged) < rows:
            assert time.monotonic() < deadline, f"only {len(self.acknowledged)} rows in time"
            time.sleep(0.2)

    def assert_stored_exactly_once(self) -> None:
        """Every acknowledged row is in the owner's export, and none is in it twice."""
        with self._client() as client:
            exported = client.get("/v1/audit/export", params={"owner": self.owner, **window()})
        assert exported.status_code == 200, exported.text
        stored = Counter(orjson.loads(line)["content"] for line in exported.content.splitlines())
        doubled = [c for c, n in stored.items() if n > 1]
        missing = [c for c in self.acknowledged if c not in stored]
        assert not doubled, f"{len(doubled)} rows stored twice, e.g. {doubled[:3]}"
        assert not missing, f"{len(missing)} acknowledged rows missing, e.g. {missing[:3]}"
