"""`shardlog report flows|audit ...`: a report from the router (GET /v1/{flows,audit}/report)
printed as a table. The token comes from --token or SHARDLOG_TOKEN."""

from __future__ import annotations

import argparse
import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from router.cli import local_tls
from router.cli.output import output, print_table
from router.settings import Settings


def tls_context(settings: Settings, cacert: str | None) -> ssl.SSLContext:
    """Verifies the router with --cacert, else the local cluster's CA when it has one, else the
    system's CAs."""
    if cacert is None and local_tls.recorded(settings):
        cacert = str(local_tls.authority(settings).cert)
    return ssl.create_default_context(cafile=cacert)


def cmd_report(settings: Settings, args: argparse.Namespace) -> int:
    scheme = "https" if settings.server.tls_cert_file else "http"
    base = args.url or f"{scheme}://{settings.server.host}:{settings.server.port}"
    key = "switch" if args.kind == "flows" else "owner"
    params: list[tuple[str, str]] = [(key, k) for k in args.key]
    if args.prefix is not None:
        params.append((f"{key}_prefix", args.prefix))
    params += [("from", args.start), ("to", args.to)]
    for name in ("bucket", "order_by", "order", "limit", "backend"):
        value = getattr(args, name)
        if value is not None:
            params.append((name, str(value)))
    params += [("group_by", g) for g in args.group_by] + [("metrics", m) for m in args.metrics]
    params += [tuple(f.split("=", 1)) for f in args.filter]
    if urllib.parse.urlsplit(base).scheme not in ("http", "https"):
        raise ValueError(f"--url {base} is not an http(s) URL")
    request = urllib.request.Request(  # noqa: S310 (the scheme is checked above)
        f"{base}/v1/{args.kind}/report?{urllib.parse.urlencode(params)}",
        headers={"Authorization": f"Bearer {args.token or os.environ.get('SHARDLOG_TOKEN', '')}"},
    )
    try:
        with urllib.request.urlopen(  # noqa: S310
            request, timeout=args.timeout, context=tls_context(settings, args.cacert)
        ) as response:
            answer: dict[str, Any] = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        body = json.loads(exc.read() or b"{}").get("error", {})
        where = f" ({body['field']})" if body.get("field") else ""
        raise RuntimeError(f"{exc.code}{where}: {body.get('message', exc.reason)}") from None
    columns = answer["group_by"] + answer["metrics"]
    output(args, answer, lambda: print_table(answer["groups"], columns))
    if answer["partial"] and not args.json:
        failed = ", ".join(f"{f['shard']} ({f['reason']})" for f in answer["failed_shards"])
        print(f"partial: no answer from {failed}")
    return 0


def add_parsers(commands: Any) -> None:
    report = commands.add_parser("report", help="a report (roll-up) from the router, as a table")
    report.add_argument("kind", choices=["flows", "audit"])
    report.add_argument(
        "key",
        nargs="*",
        help="switches (flows) or owners (audit); none (and no --prefix): every one the token "
        "reaches",
    )
    report.add_argument(
        "--prefix", help="also every switch (flows) or owner (audit) whose key starts with this"
    )
    report.add_argument("--from", dest="start", required=True, help="RFC 3339, inclusive")
    report.add_argument("--to", required=True, help="RFC 3339, exclusive")
    report.add_argument("--group-by", action="append", default=[], help="repeatable")
    report.add_argument("--metrics", action="append", default=[], help="repeatable")
    report.add_argument("--bucket")
    report.add_argument("--order-by")
    report.add_argument("--order", choices=["asc", "desc"])
    report.add_argument("--limit", type=int)
    report.add_argument("--backend", choices=["fanout", "fdw"])
    report.add_argument(
        "--filter", action="append", default=[], help="a search filter as NAME=VALUE: src_ip=..."
    )
    report.add_argument("--url", help="the router; default: this host's configured one")
    report.add_argument("--token", help="an API token; default: $SHARDLOG_TOKEN")
    report.add_argument(
        "--cacert", help="CA of an https router; default: the local cluster's CA (make up TLS=1)"
    )
    report.add_argument("--timeout", type=float, default=300.0)
    report.add_argument("--json", action="store_true", help="print the answer as JSON")
    report.set_defaults(run=cmd_report)
