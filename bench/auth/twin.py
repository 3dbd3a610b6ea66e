"""One process serving the router three times, as `shardlog serve` does (same HTTP protocol,
same limits, uvloop, access log): the app with SHARDLOG_AUTH__MODE=open on one port, with
tokens on another, and open again on a third (the A/A pair: what two identical apps of one
process differ by). bench/auth runs their requests in turns and reads this one process's CPU
per turn: the same interpreter, heap and hash seed for all, so what differs between open and
tokens is authentication alone, or the noise the A/A pair shows.

    python -m bench.auth.twin OPEN_PORT TOKENS_PORT OPEN_B_PORT
        (settings from the SHARDLOG_* environment)
"""

from __future__ import annotations

import asyncio
import logging
import sys

import uvicorn

from router.app import create_app
from router.http.limits import connection_limits
from router.http.protocol import protocol_factory
from router.settings import AuthSettings, Settings


async def serve(settings: Settings, apps: list[tuple[str, int]]) -> None:
    """One app per (auth mode, port)."""
    http = protocol_factory(connection_limits(settings.server))
    servers = []
    for mode, port in apps:
        app = create_app(settings.model_copy(update={"auth": AuthSettings(mode=mode)}))
        config = uvicorn.Config(
            app,
            host=settings.server.host,
            port=port,
            log_level="info",
            http=http,
            timeout_keep_alive=settings.server.keep_alive_timeout_s,
        )
        servers.append(uvicorn.Server(config))
    await asyncio.gather(*(server.serve() for server in servers))


def main() -> int:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    open_port, tokens_port, open_b_port = (int(a) for a in sys.argv[1:4])
    settings = Settings()
    import uvloop

    apps = [("open", open_port), ("tokens", tokens_port), ("open", open_b_port)]
    uvloop.run(serve(settings, apps))
    return 0


if __name__ == "__main__":
    sys.exit(main())
