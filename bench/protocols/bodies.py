"""The same audit rows encoded as each way in sends them, in requests (or, for syslog, TCP
streams) of ``batch`` rows. Pure: built before any clock starts.

- ndjson: shardlog's own POST /v1/audit, one JSON object a line;
- es_bulk: POST /_bulk, a ``create`` action naming the owner as the index, then the document
  (``@timestamp``, ``message``);
- loki: POST /loki/api/v1/push, protobuf + snappy as Promtail sends it, a stream per owner
  (label ``owner``);
- otlp: POST /v1/logs, protobuf as the OpenTelemetry SDKs send it, a resource per owner
  (``service.name``);
- syslog: RFC 5424 messages, octet-counted on TCP (RFC 6587), the owner as APP-NAME."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from typing import Any

import cramjam
import orjson
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from router.protocols.loki import PushRequest

Record = dict[str, Any]
Encoder = Callable[[list[Record]], bytes]


def _nanos(ts: str) -> int:
    moment = datetime.fromisoformat(ts)
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1_000


def _by_owner(records: list[Record]) -> dict[str, list[Record]]:
    grouped: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        grouped[record["owner"]].append(record)
    return grouped


def ndjson(records: list[Record]) -> bytes:
    return b"".join(orjson.dumps(r) + b"\n" for r in records)


def es_bulk(records: list[Record]) -> bytes:
    lines = []
    for r in records:
        lines.append(orjson.dumps({"create": {"_index": r["owner"]}}))
        lines.append(orjson.dumps({"@timestamp": r["ts"], "message": r["content"]}))
    return b"\n".join(lines) + b"\n"


def loki(records: list[Record]) -> bytes:
    push = PushRequest()
    for owner, mine in _by_owner(records).items():
        stream = push.streams.add(labels=f'{{owner="{owner}"}}')
        for r in mine:
            entry = stream.entries.add(line=r["content"])
            nanos = _nanos(r["ts"])
            entry.timestamp.seconds, entry.timestamp.nanos = divmod(nanos, 1_000_000_000)
    return bytes(cramjam.snappy.compress_raw(push.SerializeToString()))


def otlp(records: list[Record]) -> bytes:
    export = ExportLogsServiceRequest()
    for owner, mine in _by_owner(records).items():
        resource = export.resource_logs.add()
        attribute = resource.resource.attributes.add(key="service.name")
        attribute.value.string_value = owner
        scope = resource.scope_logs.add()
        for r in mine:
            record = scope.log_records.add(time_unix_nano=_nanos(r["ts"]))
            record.body.string_value = r["content"]
    return bytes(export.SerializeToString())


def syslog(records: list[Record]) -> bytes:
    frames = []
    for r in records:
        message = f"<14>1 {r['ts']} bench {r['owner']} - - - {r['content']}".encode()
        frames.append(b"%d %b" % (len(message), message))
    return b"".join(frames)


ENCODERS: dict[str, Encoder] = {
    "ndjson": ndjson,
    "es_bulk": es_bulk,
    "loki": loki,
    "otlp": otlp,
    "syslog": syslog,
}
# How each HTTP way in is posted: path, headers.
HTTP: dict[str, tuple[str, dict[str, str]]] = {
    "ndjson": ("/v1/audit", {"content-type": "application/x-ndjson"}),
    "es_bulk": ("/_bulk", {"content-type": "application/x-ndjson"}),
    "loki": ("/loki/api/v1/push", {"content-type": "application/x-protobuf"}),
    "otlp": ("/v1/logs", {"content-type": "application/x-protobuf"}),
}


def batches(records: list[Record], batch: int, encode: Encoder) -> list[bytes]:
    return [encode(records[start : start + batch]) for start in range(0, len(records), batch)]
