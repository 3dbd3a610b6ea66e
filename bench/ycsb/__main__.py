"""bench/ycsb: a YCSB client for shardlog. Loads recordcount records once, then runs each
workload (A-F by default, YCSB's core workloads as property files in bench/ycsb/workloads) on
them, with threadcount concurrent clients; prints YCSB's own text layout per phase and writes
it to bench/results/ycsb/<phase>.txt, plus bench/results/ycsb.{json,png}. Every operation's
result is checked; any that is not Return=OK makes the exit status 1.

    python -m bench.ycsb                                   # A-F, the files' counts
    python -m bench.ycsb --recordcount 20000 --operationcount 5000 --threads 4
    python -m bench.ycsb -P bench/ycsb/workloads/workloada -p requestdistribution=uniform
    python -m bench.ycsb --url http://127.0.0.1:8080 --token "$TOKEN"   # a running router

Without --url it starts its own 12-shard cluster and router on SHARDLOG_BENCH_BASE_PORT /
SHARDLOG_BENCH_ROUTER_PORT (or --base-port / --router-port).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

from bench.harness import (
    BENCH_BASE_PORT,
    BENCH_ROUTER_PORT,
    auth_for,
    bench_cluster,
    bench_settings,
)
from bench.stamps import mode_of
from bench.ycsb.properties import PropertyError, Workload, load_properties, workload_from
from bench.ycsb.suite import DEFAULT_SLOT_US, Session, run_session, write_outputs
from router import clock

WORKLOADS = Path(__file__).parent / "workloads"
STANDARD = [WORKLOADS / f"workload{letter}" for letter in "abcdef"]


def arguments_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.ycsb", description=__doc__)
    parser.add_argument(
        "-P",
        dest="files",
        action="append",
        type=Path,
        help="a workload property file; repeat for several, run in order (default: A-F)",
    )
    parser.add_argument(
        "-p",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a property for every workload, over the files' (as YCSB's -p)",
    )
    parser.add_argument("--recordcount", type=int, help="records loaded (-p recordcount=)")
    parser.add_argument("--operationcount", type=int, help="operations per workload")
    parser.add_argument("--threads", type=int, help="concurrent clients (-p threadcount=)")
    parser.add_argument("--url", help="a running router instead of a cluster of our own")
    parser.add_argument("--token", help="with --url: a bearer token with audit read and write")
    parser.add_argument("--owner", help="the owner holding the records (default: a fresh one)")
    parser.add_argument(
        "--slot-us", type=int, default=DEFAULT_SLOT_US, help="microseconds of ts per record"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--base-port", type=int, default=BENCH_BASE_PORT)
    parser.add_argument("--router-port", type=int, default=BENCH_ROUTER_PORT)
    return parser


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    return arguments_parser().parse_args(argv)


def workloads_of(args: argparse.Namespace) -> list[Workload]:
    overrides: dict[str, str] = {}
    for item in args.overrides:
        key, separator, value = item.partition("=")
        if not separator or not key.strip():
            raise PropertyError(f"-p {item!r}: expected key=value")
        overrides[key.strip()] = value.strip()
    for key, value in (
        ("recordcount", args.recordcount),
        ("operationcount", args.operationcount),
        ("threadcount", args.threads),
    ):
        if value is not None:
            overrides[key] = str(value)
    return [
        workload_from({**load_properties(path), **overrides}, path.name)
        for path in args.files or STANDARD
    ]


def session_owner(args: argparse.Namespace, table: str) -> str:
    if args.owner:
        return str(args.owner)
    return f"ycsb-{table}-{clock.now():%Y%m%dT%H%M%S}"


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    try:
        workloads = workloads_of(args)
    except PropertyError as exc:
        print(f"bench.ycsb: {exc}", file=sys.stderr)
        return 2
    owner = session_owner(args, workloads[0].table)
    session: Session
    if args.url:
        headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
        session = asyncio.run(
            run_session(args.url, headers, workloads, owner, args.slot_us, args.seed)
        )
    else:
        data_dir = Path(tempfile.mkdtemp(prefix="shardlog-bench-ycsb-"))
        settings = bench_settings(data_dir, base_port=args.base_port, router_port=args.router_port)
        try:
            with bench_cluster(settings) as (_cluster, router):
                assert router is not None
                session = asyncio.run(
                    run_session(
                        router.url, auth_for(router.url), workloads, owner, args.slot_us, args.seed
                    )
                )
        finally:
            shutil.rmtree(data_dir, ignore_errors=True)
    paths = write_outputs(session, mode_of(arguments_parser(), args))
    print(f"wrote {', '.join(str(path) for path in paths)}")
    for problem in session.problems:
        print(f"  CHECK FAILED: {problem}", file=sys.stderr)
    if session.failed:
        print(f"bench.ycsb: {session.failed} operations did not return OK", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
