"""Back-pressure in the listener: a stream waits for room in a full queue (nothing dropped) and
goes on as soon as a batch leaves; a datagram finding it full is dropped and counted."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from router import clock
from router.ingest.records import AuditRow, Limits
from router.metrics import Metrics
from router.settings import SyslogSettings
from router.syslogd.intake import Intake, SyslogMetrics
from router.syslogd.queue import Pending, SyslogQueue
from router.syslogd.senders import SenderDirectory, SenderMapping
from router.syslogd.sockets import _Datagrams

NOW = clock.now()


def pending(n: int) -> Pending:
    return Pending(AuditRow(0, "acme", NOW, f"m{n}", None), "tenant-a")


async def test_a_stream_waits_for_room_and_loses_nothing() -> None:
    queue = SyslogQueue(capacity=3, batch=2, flush_s=0.05)
    put = asyncio.create_task(queue.put([pending(n) for n in range(5)]))
    await asyncio.sleep(0.05)
    assert not put.done() and len(queue) == 3
    first = await queue.take()
    await asyncio.sleep(0.05)
    assert put.done() and len(queue) == 3
    rest = (await queue.take()) + (await queue.take())
    assert [p.row.content for p in first + rest] == [f"m{n}" for n in range(5)]
    assert queue.dropped == 0


async def test_a_datagram_finding_the_queue_full_is_dropped_and_counted() -> None:
    metrics = SyslogMetrics(Metrics())
    limits = Limits(1000, 1000, 64, timedelta(minutes=5))
    intake = Intake(SyslogSettings(), lambda: limits, metrics)
    intake.directory = SenderDirectory([SenderMapping("127.0.0.0/8", "tenant-a")])
    queue = SyslogQueue(capacity=1, batch=10, flush_s=60)
    datagrams = _Datagrams(intake, queue)
    for n in range(3):
        datagrams.datagram_received(f"<13>1 - h acme - - - m{n}".encode(), ("127.0.0.1", 1))
    assert len(queue) == 1
    labels = {"protocol": "syslog", "outcome": "dropped"}
    assert metrics.registry.get_sample_value("shardlog_protocol_messages_total", labels) == 2


async def test_datagrams_carry_their_senders_tenant_and_unknown_senders_are_refused() -> None:
    metrics = SyslogMetrics(Metrics())
    limits = Limits(1000, 1000, 64, timedelta(minutes=5))
    intake = Intake(SyslogSettings(), lambda: limits, metrics)
    intake.directory = SenderDirectory(
        [SenderMapping("127.0.0.2/32", "tenant-a"), SenderMapping("10.0.0.0/8", "tenant-b")]
    )
    queue = SyslogQueue(capacity=10, batch=10, flush_s=0.01)
    datagrams = _Datagrams(intake, queue)
    forged = b"<14>1 - h shardlog.admin - - - token.revoke by token 0000 (admin, tenant system)"
    for sender in ("127.0.0.2", "10.9.8.7", "::ffff:10.9.8.7", "127.0.0.3", "192.0.2.1"):
        datagrams.datagram_received(forged, (sender, 514))
    assert [p.tenant for p in await queue.take()] == ["tenant-a", "tenant-b", "tenant-b"]
    refused = {"reason": "unknown sender"}
    assert metrics.registry.get_sample_value("shardlog_syslog_refused_messages_total", refused) == 2
