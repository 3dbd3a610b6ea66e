"""The pass: known numbers of audit writes and searches through the router while the shards
log every statement, then the two reports of what the shards ran (pg_stat_statements per shard
and pgBadger over every shard log), and how far each report's count of the write path and of
the search statement is from the requests sent."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from bench import traffic
from bench.harness import verdict
from bench.pgbadger import report, statements
from bench.pgbadger.verbose_logs import pass_lines, verbose_logs
from services.postgres import PostgresInstance

COUNT_ERROR_PCT = 5.0


@dataclass(frozen=True)
class PassPlan:
    writes: int
    searches: int
    rows: int
    clients: int
    owners: int


def error_pct(counted: int, sent: int) -> float:
    return round(100 * abs(counted - sent) / max(sent, 1), 2)


async def read_shards(instances: list[PostgresInstance]) -> dict[str, Any]:
    """Each shard's folded statements; a shard whose server has not loaded the library yet (it
    needs a restart: docs/operations.md) is listed as missing."""
    shards: dict[str, statements.ShardStatements] = {}
    missing = []
    for instance in instances:
        try:
            shards[instance.spec.name] = await statements.read(instance)
        except asyncpg.ObjectNotInPrerequisiteStateError:
            missing.append(instance.spec.name)
    return {"shards": shards, "missing": missing}


async def run(
    http: httpx.AsyncClient, instances: list[PostgresInstance], plan: PassPlan, out_dir: Path
) -> dict[str, Any]:
    owners = [f"pgbadger-{n}" for n in range(plan.owners)]
    write = traffic.writer(owners, plan.rows)
    # Every owner's day table exists before the pass: its creation is not the pass's.
    await traffic.send_count(http, write, plan.owners, 1, "day tables")
    with verbose_logs(instances) as offsets:
        await statements.reset(instances)
        await traffic.send_count(http, write, plan.writes, plan.clients, "writes")
        search = traffic.searcher(owners)
        await traffic.send_count(http, search, plan.searches, plan.clients, "searches")
        read = await read_shards(instances)
        logs = {i.spec.name: pass_lines(i, offsets[i.spec.name]) for i in instances}
    badger = report.build(logs, out_dir)
    shards: dict[str, statements.ShardStatements] = read["shards"]
    cluster = statements.fold([entry for shard in shards.values() for entry in shard.folded])
    copy_entry = statements.write_path(cluster)
    search_entry = statements.search_page(cluster)
    counts = {
        "pg_stat_statements_write": copy_entry.calls if copy_entry else 0,
        "pg_stat_statements_search": search_entry.calls if search_entry else 0,
        "pgbadger_write": report.write_path_count(badger),
        "pgbadger_search": report.search_page_count(badger),
    }
    sent = {"write": plan.writes, "search": plan.searches}
    return {
        "params": {**plan.__dict__, "shards": len(instances)},
        "sent": sent,
        "counts": counts,
        "statistics_missing": read["missing"],
        "distinct_entries_by_shard": {name: s.distinct for name, s in shards.items()},
        "folded_entries_by_shard": {name: len(s.folded) for name, s in shards.items()},
        "top_by_calls": [e.summary() for e in statements.by_calls(cluster)[: statements.TOP]],
        "top_by_time_per_shard": {
            name: [e.summary() for e in statements.by_time(s.folded)[: statements.TOP]]
            for name, s in shards.items()
        },
        # Relative to bench/results (the overview links it), never a path of this machine.
        "pgbadger_report": f"{out_dir.name}/index.html",
        "targets": {
            f"{source}_{kind}_count_error_pct": verdict(
                error_pct(counts[f"{source}_{kind}"], sent[kind]), COUNT_ERROR_PCT
            )
            for source in ("pg_stat_statements", "pgbadger")
            for kind in ("write", "search")
        },
    }
