"""A RELP client that sends on and never gets its answers (their batches are not committed, or
it does not read them): the session stops reading once MAX_UNANSWERED answers wait, instead of
holding an answer for every command it is sent, and reads on once the commits come. A real
session over a socket pair, its queue without a writer: the test commits by hand."""

from __future__ import annotations

import asyncio
import socket
from datetime import timedelta

from router.ingest.records import Limits
from router.metrics import Metrics
from router.settings import SyslogSettings
from router.syslogd.intake import Intake, SyslogMetrics
from router.syslogd.queue import SyslogQueue
from router.syslogd.relp_server import MAX_UNANSWERED, relp_session
from router.syslogd.sockets import READ_BYTES, IdleReader
from tests.support import eventually_async

COMMANDS = 16 * MAX_UNANSWERED  # more than the socket buffers hold
OFFERS = b"relp_version=0\nrelp_software=test\ncommands=syslog"


def commands() -> bytes:
    frames = [b"1 open %d %s\n" % (len(OFFERS), OFFERS)]
    for n in range(2, COMMANDS + 2):
        body = b"<13>1 - h acme - - - message %d" % n
        frames.append(b"%d syslog %d %s\n" % (n, len(body), body))
    return b"".join(frames)


async def test_a_session_stops_reading_while_too_many_answers_wait() -> None:
    limits = Limits(1000, 1000, 64, timedelta(minutes=5))
    # A socket pair's peer has no address to map: the quarantine tenant takes its messages.
    settings = SyslogSettings(quarantine_tenant="relp-window")
    intake = Intake(settings, lambda: limits, SyslogMetrics(Metrics()))
    queue = SyslogQueue(capacity=2 * COMMANDS, batch=MAX_UNANSWERED, flush_s=0.01)
    server, client = socket.socketpair()
    loop = asyncio.get_running_loop()
    reader, writer = await asyncio.open_connection(sock=server)
    session = loop.create_task(relp_session(intake, queue)(IdleReader(reader, 60), writer))
    client.setblocking(False)
    data = commands()
    frame_bytes = len(data) // COMMANDS
    sending = loop.create_task(loop.sock_sendall(client, data))
    try:
        await eventually_async(lambda: len(queue) > MAX_UNANSWERED)
        # Nothing is committed: every answer waits. The session reads at most one more read's
        # worth of commands, then stops; the client's sending stalls.
        await asyncio.sleep(0.3)
        assert len(queue) <= MAX_UNANSWERED + READ_BYTES // frame_bytes + 1
        assert not sending.done()
        # The commits come: the session reads on, and every command is answered in order.
        received = b""
        async with asyncio.timeout(30):
            while received.count(b" rsp ") < COMMANDS + 1:
                if len(queue):
                    for pending in await queue.take():
                        assert pending.ticket is not None
                        pending.ticket.set_result(True)
                try:
                    received += client.recv(1 << 20)
                except BlockingIOError:
                    await asyncio.sleep(0.01)
            await sending
        answers = [line for line in received.split(b"\n") if b" rsp " in line]
        assert answers[1:] == [b"%d rsp 6 200 OK" % n for n in range(2, COMMANDS + 2)]
    finally:
        session.cancel()
        await asyncio.gather(session, return_exceptions=True)
        client.close()
