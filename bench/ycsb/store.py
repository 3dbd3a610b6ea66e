"""YCSB's DB operations over shardlog's HTTP API, each checked: an insert or update is one audit
record posted to /v1/audit (acknowledged means committed on its shard); a read must return a
version of the record at least as new as every version acknowledged before the read was sent,
with the fields as written; a scan must start at its (acknowledged) start record and hold only
well-formed versions of the records in its range."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.ycsb.measurements import ERROR, NOT_FOUND, OK, UNEXPECTED_STATE
from bench.ycsb.properties import Workload
from bench.ycsb.records import Layout, record, row_problem

MAX_PROBLEMS = 20


@dataclass
class Ledger:
    """Versions per record: the last handed out, and the newest acknowledged."""

    assigned: dict[int, int] = field(default_factory=dict)
    acknowledged: dict[int, int] = field(default_factory=dict)

    def next_version(self, keynum: int) -> int:
        version = self.assigned.get(keynum, -1) + 1
        self.assigned[keynum] = version
        return version

    def acknowledge(self, keynum: int, version: int) -> None:
        if version > self.acknowledged.get(keynum, -1):
            self.acknowledged[keynum] = version


@dataclass
class Outcome:
    status: str
    problem: str | None = None


class ShardlogStore:
    def __init__(
        self, http: httpx.AsyncClient, owner: str, workload: Workload, layout: Layout
    ) -> None:
        self.http = http
        self.owner = owner
        self.workload = workload
        self.layout = layout
        self.ledger = Ledger()
        self.problems: list[str] = []

    def _noted(self, outcome: Outcome) -> Outcome:
        if outcome.problem is not None and len(self.problems) < MAX_PROBLEMS:
            self.problems.append(outcome.problem)
        return outcome

    async def write(self, keynum: int) -> Outcome:
        """Insert (the first version) or update (the next one) of a record."""
        version = self.ledger.next_version(keynum)
        if version >= self.layout.slot_us:
            return self._noted(Outcome(ERROR, f"record {keynum}: its slot holds no more versions"))
        body = [record(self.workload, self.layout, self.owner, keynum, version)]
        try:
            response = await self.http.post("/v1/audit", json=body)
        except httpx.HTTPError as exc:
            return self._noted(Outcome(ERROR, f"write of record {keynum}: {exc!r}"))
        if response.status_code != 200 or response.json().get("accepted") != 1:
            return self._noted(
                Outcome(ERROR, f"write of record {keynum}: {response.status_code} {response.text}")
            )
        self.ledger.acknowledge(keynum, version)
        return Outcome(OK)

    async def _search(self, first: int, count: int, order: str, limit: int) -> Any:
        start, end = self.layout.slots(first, count)
        params: dict[str, str | int] = {
            "owner": self.owner,
            "from": start,
            "to": end,
            "order": order,
            "limit": limit,
        }
        response = await self.http.get("/v1/audit/search", params=params)
        if response.status_code != 200:
            raise RuntimeError(f"{response.status_code} {response.text[:300]}")
        page = response.json()
        if page.get("partial"):
            raise RuntimeError(f"partial answer: {page.get('failed_shards')}")
        return page["items"]

    async def read(self, keynum: int) -> Outcome:
        """The newest version of one record: its slot, newest first, one row."""
        expected = self.ledger.acknowledged.get(keynum)
        try:
            items = await self._search(keynum, 1, "desc", 1)
        except (httpx.HTTPError, RuntimeError) as exc:
            return self._noted(Outcome(ERROR, f"read of record {keynum}: {exc}"))
        if not items:
            return self._noted(Outcome(NOT_FOUND, f"read of record {keynum}: nothing found"))
        problem = row_problem(self.workload, self.layout, items[0])
        if problem is None and items[0]["attrs"]["keynum"] != keynum:
            problem = f"read of record {keynum} returned record {items[0]['attrs']['keynum']}"
        if problem is None and expected is not None and items[0]["attrs"]["version"] < expected:
            problem = (
                f"read of record {keynum} returned version {items[0]['attrs']['version']} "
                f"after version {expected} was acknowledged"
            )
        return self._noted(Outcome(UNEXPECTED_STATE, problem)) if problem else Outcome(OK)

    async def scan(self, keynum: int, length: int) -> Outcome:
        """One ascending page of at most ``length`` rows over ``length`` records' slots."""
        try:
            items = await self._search(keynum, length, "asc", length)
        except (httpx.HTTPError, RuntimeError) as exc:
            return self._noted(Outcome(ERROR, f"scan from record {keynum}: {exc}"))
        if not items or items[0]["attrs"]["keynum"] != keynum:
            return self._noted(Outcome(NOT_FOUND, f"scan from record {keynum}: it is missing"))
        for item in items:
            problem = row_problem(self.workload, self.layout, item)
            if problem is None and not keynum <= item["attrs"]["keynum"] < keynum + length:
                problem = f"scan from record {keynum} returned record {item['attrs']['keynum']}"
            if problem is not None:
                return self._noted(Outcome(UNEXPECTED_STATE, problem))
        return Outcome(OK)
