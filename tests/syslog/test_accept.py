"""Accepting when the process is out of files: real loopback sockets, with this process's
open-files limit lowered so that only a few more fit. The listener pauses, doubling the pause,
instead of retrying at once (a busy loop), and takes the waiting connections once files are
free again."""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import resource
import socket
import time
from collections.abc import Iterator

from router.syslogd.acceptor import Acceptor, listening_sockets
from tests.support import eventually_async

RETRY_S = 0.05
RETRY_MAX_S = 0.2
SPARE_FILES = 4
CLIENTS = 12


def limit_leaving(spare: int) -> int:
    """The soft open-files limit under which exactly ``spare`` more files can be opened."""
    in_use = {int(name) for name in os.listdir("/proc/self/fd")}
    free = 0
    for number in range(1 << 20):
        if number not in in_use:
            free += 1
            if free > spare:
                return number
    raise AssertionError("no such limit")


@contextlib.contextmanager
def open_files_limit(spare: int) -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit_leaving(spare), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_out_of_files_the_listener_pauses_then_takes_the_waiting_connections() -> None:
    [listener] = listening_sockets("127.0.0.1", 0)
    port = listener.getsockname()[1]
    accepted: list[socket.socket] = []
    pauses: list[tuple[int | None, float, float]] = []
    acceptor = Acceptor(
        listener,
        lambda conn, _: accepted.append(conn),
        RETRY_S,
        RETRY_MAX_S,
        lambda exc, pause_s: pauses.append((exc.errno, pause_s, time.monotonic())),
    )
    # Connected before the limit is lowered: the kernel holds them in the backlog.
    clients = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(CLIENTS)]
    try:
        with open_files_limit(SPARE_FILES):
            started = time.monotonic()
            acceptor.start()
            await eventually_async(lambda: len(pauses) >= 4)
            # (the directory listing of limit_leaving took a file of its own for a moment)
            spare = len(accepted)
            assert SPARE_FILES <= spare <= SPARE_FILES + 1
            assert [(code, pause) for code, pause, _ in pauses[:4]] == [
                (errno.EMFILE, RETRY_S),
                (errno.EMFILE, 2 * RETRY_S),
                (errno.EMFILE, 4 * RETRY_S),
                (errno.EMFILE, RETRY_MAX_S),  # no longer than the longest pause
            ]
            # Each attempt waited for the pause before it, none came at once.
            waited = pauses[3][2] - started
            assert waited >= RETRY_S + 2 * RETRY_S + 4 * RETRY_S - 0.01
            for earlier, later in itertools.pairwise(pauses[:4]):
                assert later[2] - earlier[2] >= earlier[1] - 0.01
            # Files free again: the waiting connections are taken at the next attempt.
            for conn in accepted:
                conn.close()
            await eventually_async(lambda: len(accepted) == 2 * spare)
        await eventually_async(lambda: len(accepted) == CLIENTS)
        # A connection after the shortage is taken at once.
        late = socket.create_connection(("127.0.0.1", port), timeout=5)
        clients.append(late)
        await eventually_async(lambda: len(accepted) == CLIENTS + 1, within_s=1.0)
    finally:
        acceptor.close()
        for sock in clients + accepted:
            sock.close()
