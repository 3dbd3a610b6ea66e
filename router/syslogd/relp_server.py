"""RELP sessions (router/protocols/relp.py): each ``syslog`` command's message is queued with a
ticket and answered ``200 OK`` only once the batch holding it committed; the answers go out in
the order the commands came, by a task of the session's own, while the session reads on (the
client's window of unanswered commands keeps the pipe full), as long as fewer than
MAX_UNANSWERED answers wait. A full queue stops the reading (flow control). A message that can
never be stored (it does not parse, has no owner, or the write path refuses it) is counted as
rejected and answered ``200 OK`` as librelp's own server does: sending it again would fail the
same way. A session that ends before a commit leaves its commands unanswered, and the client
sends them again on its next session: at least once, never lost. What a session had queued
stays queued when its client leaves (one that gave up while the database was down): it is
written when the database returns, and the client's resend is a second copy."""

from __future__ import annotations

import asyncio
import contextlib

from router.protocols import relp
from router.syslogd.intake import Intake
from router.syslogd.queue import SyslogQueue
from router.syslogd.senders import peer_of
from router.syslogd.sockets import READ_BYTES, IdleReader, Session

OK = b"200 OK"
# The offers of an open command are small; a syslog command holds one message.
OFFERS_BYTES = 4096
# Answers a session holds for its client at most (librelp's window is 128 commands): past them
# it stops reading until they went out, so a client that does not read its answers cannot make
# the listener's memory grow.
MAX_UNANSWERED = 1024
RECHECK_S = 0.01
Answer = tuple[int, "asyncio.Future[bool] | None", bytes]


def relp_session(intake: Intake, queue: SyslogQueue) -> Session:
    async def session(reader: IdleReader, writer: asyncio.StreamWriter) -> None:
        peer = peer_of(writer)
        sender = peer.address
        framer = relp.RelpFramer(max(intake.max_bytes, OFFERS_BYTES))
        answers: asyncio.Queue[Answer | None] = asyncio.Queue()
        answering = asyncio.get_running_loop().create_task(_answer(answers, writer, reader.idle_s))
        opened = closing = False
        try:
            while not closing and (data := await reader.read(READ_BYTES)):
                if answering.done():  # its writing failed, or a commit never came
                    break
                for frame in framer.feed(data):
                    if frame.command == "open":
                        text = relp.open_answer(relp.offers(frame.data))
                        opened = text.startswith(OK)
                        answers.put_nowait((frame.txnr, None, text))
                    elif frame.command == "close":
                        answers.put_nowait((frame.txnr, None, b""))
                        closing = True
                        break
                    elif frame.command != "syslog" or not opened:
                        answers.put_nowait((frame.txnr, None, b"500 command not expected here"))
                    elif (item := intake.pending(frame.data, peer)) is None:
                        answers.put_nowait((frame.txnr, None, OK))
                    else:
                        ticket = asyncio.get_running_loop().create_future()
                        reader.owe(ticket)
                        await queue.put([item._replace(ticket=ticket)])
                        answers.put_nowait((frame.txnr, ticket, OK))
                if framer.broken is not None:
                    intake.refuse(sender, "unframeable", f"RELP: {framer.broken}")
                    break
                if answers.qsize() > MAX_UNANSWERED:
                    await _answered_down_to(MAX_UNANSWERED // 2, answers, answering)
            answers.put_nowait(None)
            await answering
        except asyncio.CancelledError:
            # The listener stops: what was committed is answered, then the server says so.
            answers.put_nowait(None)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(answering, 1.0)
            writer.write(relp.SERVER_CLOSE)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.drain(), 1.0)
            raise
        finally:
            answering.cancel()
            await asyncio.gather(answering, return_exceptions=True)

    return session


async def _answered_down_to(
    count: int, answers: asyncio.Queue[Answer | None], answering: asyncio.Task[None]
) -> None:
    """Until at most ``count`` answers wait, or the answering ended."""
    while answers.qsize() > count and not answering.done():
        await asyncio.wait([answering], timeout=RECHECK_S)


async def _answer(
    answers: asyncio.Queue[Answer | None], writer: asyncio.StreamWriter, idle_s: float
) -> None:
    """Each answer once its ticket resolved, in order; ends at None or an unresolved ticket,
    fails (TimeoutError) when the sender has not read its answers for ``idle_s``."""
    while (answer := await answers.get()) is not None:
        txnr, ticket, text = answer
        if ticket is not None:
            if not ticket.done():
                await asyncio.wait([ticket])
            if ticket.cancelled():
                return
        writer.write(relp.response(txnr, text))
        async with asyncio.timeout(idle_s):
            await writer.drain()
