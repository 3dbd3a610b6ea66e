"""bench/pgbadger: what the shards run, as pgfouine showed it: known numbers of audit writes
and one-page searches through the router while every shard logs every statement
(log_min_duration_statement = 0, a pgBadger prefix; reloaded for the pass only), then a
pgBadger HTML report over every shard log into bench/results/pgbadger/ and pg_stat_statements'
top 20 per shard, day tables folded so that the write path (its one statement, or the COPY)
and the search page are one entry each. Targets: each report counts both within 5 % of the
requests sent.

Each shard is its own group (one shard per owner), so that one request is one statement: in a
group of k shards a search runs on each shard that holds the owner's table.

    python -m bench.pgbadger [--writes 5000] [--searches 5000] [--rows 10] [--clients 4]
    python -m bench.pgbadger --quick        # 500 + 500 requests on 4 shards

Ports default to SHARDLOG_BENCH_BASE_PORT / SHARDLOG_BENCH_ROUTER_PORT (26432, 8090).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from bench import cluster_run, harness
from bench.harness import bench_settings, write_results
from bench.pgbadger import statement_pass
from bench.stamps import mode_of

NAME = "pgbadger"


def label(entry: dict[str, Any]) -> str:
    """The role without its prefix and the statement's first words on one line."""
    return f"{entry['role'].removeprefix('shardlog_')}: {' '.join(entry['query'].split())[:44]}"


def plot(payload: dict[str, Any]) -> Any:
    def draw(figure: Any) -> None:
        top = payload["top_by_calls"][:12][::-1]
        axes = figure.add_subplot(1, 2, 1)
        axes.barh([label(e) for e in top], [e["calls"] for e in top])
        axes.set_xlabel("calls, every shard (day tables folded)")
        axes.set_title("most frequent statements")
        axes.tick_params(axis="y", labelsize=7)
        counts = payload["counts"]
        sent = payload["sent"]
        axes = figure.add_subplot(1, 2, 2)
        harness.grouped_bars(
            axes,
            ["write (one statement or COPY)", "search page"],
            {
                "sent": [sent["write"], sent["search"]],
                "pg_stat_statements": [
                    counts["pg_stat_statements_write"],
                    counts["pg_stat_statements_search"],
                ],
                "pgBadger": [counts["pgbadger_write"], counts["pgbadger_search"]],
            },
        )
        axes.set_ylabel("requests / statements")
        axes.set_title("requests sent vs counted by each report")
        axes.legend()

    return draw


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pgbadger")
    parser.add_argument("--writes", type=int, default=5000)
    parser.add_argument("--searches", type=int, default=5000)
    parser.add_argument("--rows", type=int, default=10, help="rows per write (< 1,000)")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--owners", type=int, default=16)
    parser.add_argument("--shards", type=int, default=12)
    parser.add_argument("--quick", action="store_true", help="500 + 500 requests, 4 shards")
    cluster_run.add_cluster_flags(parser, "var/bench-pgbadger")
    args = parser.parse_args(argv)
    if args.quick:
        args.writes, args.searches, args.shards, args.owners = 500, 500, 4, 8
    plan = statement_pass.PassPlan(args.writes, args.searches, args.rows, args.clients, args.owners)
    settings = bench_settings(
        args.data_dir,
        shards=args.shards,
        groups=args.shards,
        base_port=args.base_port,
        router_port=args.router_port,
    )
    out_dir = harness.RESULTS / NAME
    payload = cluster_run.run(
        settings,
        args.keep,
        lambda http, cluster: statement_pass.run(http, cluster.shards, plan, out_dir),
    )
    json_path, _ = write_results(NAME, payload, plot(payload), mode=mode_of(parser, args))
    print(f"  counts {payload['counts']} of sent {payload['sent']}")
    print(f"  wrote {json_path} and {out_dir / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
