"""One process serving the router twice, as `shardlog serve` does (same HTTP protocol, same
limits, uvloop, access log): the app with SHARDLOG_AUTH__MODE=open on one port and with tokens
on another. bench/auth runs their requests in turns and reads this one process's CPU per turn:
the same interpreter, heap and hash seed for both, so what differs is authentication alone.

    python -m bench.auth.twin OPEN_PORT TOKENS_PORT   (settings from the SHARDLOG_* environment)
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


async def serve(settings: Settings, ports: dict[str, int]) -> None:
    http = protocol_factory(connection_limits(settings.server))
    servers = []
    for mode, port in ports.items():
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
    open_port, tokens_port = (int(a) for a in sys.argv[1:3])
    settings = Settings()
    import uvloop

    uvloop.run(serve(settings, {"open": open_port, "tokens": tokens_port}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
