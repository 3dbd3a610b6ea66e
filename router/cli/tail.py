"""`shardlog tail audit|flows ...`: rows as they are committed (GET /v1/{audit,flows}/tail),
one line each, resuming where it left off when the connection breaks (Last-Event-ID). The
token comes from --token or SHARDLOG_TOKEN."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from router.cli.events import EventParser, ServerEvent
from router.cli.report import tls_context
from router.settings import Settings

_PAUSES_S = (0.5, 1.0, 2.0, 5.0)


class Refused(RuntimeError):
    """The router refused the stream for good (4xx but 429): retrying cannot help."""


def _params(args: argparse.Namespace) -> list[tuple[str, str]]:
    key = "switch" if args.kind == "flows" else "owner"
    params: list[tuple[str, str]] = [(key, k) for k in [*args.key, *args.named]]
    if args.prefix:
        params.append((f"{key}_prefix", args.prefix))
    params += [("q", q) for q in args.q]
    if args.match:
        params.append(("match", args.match))
    if args.start:
        params.append(("from", args.start))
    for item in args.filter:
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--filter {item!r} is not NAME=VALUE")
        params.append((name, value))
    return params


def line_of(kind: str, item: dict[str, Any]) -> str:
    marks = ("late", "merged", "replayed", "sampling_mixed")
    flags = "".join(f" [{flag}]" for flag in marks if item.get(flag))
    if kind == "flows":
        # What exporters tell, when a record said it (.get: a router before them sends none).
        said = []
        if item.get("tcp_flags") is not None:
            said.append(f" tcp_flags=0x{item['tcp_flags']:02x}")
        if item.get("sampling_rate") is not None:
            said.append(f" sampling=1/{item['sampling_rate']}")
        flags = "".join(said) + flags
        return (
            f"{item['first_seen']} {item['switch']} {item['src_ip']}:{item['src_port']} -> "
            f"{item['dst_ip']}:{item['dst_port']} proto={item['proto']} bytes={item['bytes']} "
            f"packets={item['packets']}{flags}"
        )
    return f"{item['ts']} {item['owner']} {item['content']}{flags}"


def _show(args: argparse.Namespace, event: ServerEvent) -> None:
    if event.event == "message":
        item = json.loads(event.data)
        print(json.dumps(item) if args.json else line_of(args.kind, item), flush=True)
    elif event.event == "partial":
        print(f"shardlog: replay is partial: {event.data}", file=sys.stderr, flush=True)
    elif event.event == "overflow":
        print("shardlog: fell behind the stream; resuming", file=sys.stderr, flush=True)


def _follow(settings: Settings, args: argparse.Namespace, url: str, parser: EventParser) -> int:
    """One connection: the number of rows it printed. Raises Refused, or OSError when the
    connection broke."""
    headers = {
        "Authorization": f"Bearer {args.token or os.environ.get('SHARDLOG_TOKEN', '')}",
        "Accept": "text/event-stream",
    }
    if parser.last_id is not None:
        headers["Last-Event-ID"] = parser.last_id
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 (checked by caller)
    shown = 0
    try:
        with urllib.request.urlopen(  # noqa: S310
            request, timeout=args.timeout, context=tls_context(settings, args.cacert)
        ) as response:
            for raw in response:
                event = parser.feed(raw.decode().rstrip("\r\n"))
                if event is not None and event.event == "unauthorized":
                    # The token was revoked, expired or narrowed: reconnecting cannot help.
                    error = json.loads(event.data).get("error", {})
                    raise Refused(f"401 (authorization): {error.get('message', event.data)}")
                if event is not None:
                    _show(args, event)
                    shown += event.event == "message"
                    if args.limit and shown >= args.limit:
                        return shown
    except urllib.error.HTTPError as exc:
        body = json.loads(exc.read() or b"{}").get("error", {})
        where = f" ({body['field']})" if body.get("field") else ""
        message = f"{exc.code}{where}: {body.get('message', exc.reason)}"
        if exc.code == 429 or exc.code >= 500:
            raise OSError(message) from None
        raise Refused(message) from None
    return shown


def cmd_tail(settings: Settings, args: argparse.Namespace) -> int:
    scheme = "https" if settings.server.tls_cert_file else "http"
    base = args.url or f"{scheme}://{settings.server.host}:{settings.server.port}"
    if urllib.parse.urlsplit(base).scheme not in ("http", "https"):
        raise ValueError(f"--url {base} is not an http(s) URL")
    url = f"{base}/v1/{args.kind}/tail?{urllib.parse.urlencode(_params(args))}"
    parser = EventParser()
    failures = 0
    shown = 0
    while True:
        try:
            shown += _follow(settings, args, url, parser)
            failures = 0
            if args.limit and shown >= args.limit:
                return 0
        except Refused as exc:
            raise RuntimeError(str(exc)) from None
        except (OSError, TimeoutError) as exc:
            pause = _PAUSES_S[min(failures, len(_PAUSES_S) - 1)]
            failures += 1
            print(f"shardlog: {exc}; reconnecting in {pause:g} s", file=sys.stderr, flush=True)
            time.sleep(pause)
        except KeyboardInterrupt:
            return 0


def add_parsers(commands: Any) -> None:
    tail = commands.add_parser("tail", help="print rows as they are written, like tail -f")
    tail.add_argument("kind", choices=["audit", "flows"])
    tail.add_argument("key", nargs="*", help="owners (audit) or switches (flows); none: all")
    tail.add_argument(
        "--owner", "--switch", dest="named", action="append", default=[], help="repeatable"
    )
    tail.add_argument("--prefix", help="also every owner or switch starting with this")
    tail.add_argument("--q", action="append", default=[], help="a pattern; repeatable (audit)")
    tail.add_argument("--match", choices=["substring", "regex", "iregex"])
    tail.add_argument("--from", dest="start", help="RFC 3339: first replay the rows since then")
    tail.add_argument(
        "--filter", action="append", default=[], help="a flow filter as NAME=VALUE: src_ip=..."
    )
    tail.add_argument("--limit", type=int, help="stop after this many rows")
    tail.add_argument("--url", help="the router; default: this host's configured one")
    tail.add_argument("--token", help="an API token; default: $SHARDLOG_TOKEN")
    tail.add_argument("--cacert", help="CA of an https router; default: the local cluster's CA")
    tail.add_argument(
        "--timeout", type=float, default=60.0, help="seconds without data before reconnecting"
    )
    tail.add_argument("--json", action="store_true", help="print each row as JSON")
    tail.set_defaults(run=cmd_tail)
