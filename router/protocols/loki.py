"""Loki's push API (POST /loki/api/v1/push): a PushRequest in protobuf (snappy-compressed by the
route, router/protocols/compression.py) or in JSON, as one list of messages per stream.

Owner: the value of the first label of ``owner_labels`` the stream has; the stream's other
labels go to attrs ``labels``, an entry's structured metadata to attrs ``metadata``. Nanosecond
timestamps are kept to the microsecond. Anything malformed is a BadRequest naming the stream or
entry (``streams[2].labels``, ``streams[2].values[7]``): Loki's pushes are refused whole."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import orjson
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
from google.protobuf.message import DecodeError

from router.errors import BadRequest, excerpt
from router.protocols import wire
from router.protocols.allowance import Allowance, Steps, run
from router.protocols.shipped import Message
from router.settings import IngestSettings
from router.timestamps import TimestampError, from_unix_nanos


def _push_classes() -> tuple[Any, Any, Any]:
    """logproto's PushRequest, StreamAdapter and EntryAdapter as Loki's pkg/push/push.proto
    defines them (the fields a push carries; the gogoproto options change nothing on the wire),
    built from a descriptor here: no generated code, no protoc step."""
    field = descriptor_pb2.FieldDescriptorProto
    optional, repeated = field.LABEL_OPTIONAL, field.LABEL_REPEATED
    proto = descriptor_pb2.FileDescriptorProto(
        name="shardlog/loki/push.proto",
        package="logproto",
        syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"],
    )
    shapes: dict[str, list[tuple[str, int, int, int, str]]] = {
        "PushRequest": [("streams", 1, field.TYPE_MESSAGE, repeated, ".logproto.StreamAdapter")],
        "StreamAdapter": [
            ("labels", 1, field.TYPE_STRING, optional, ""),
            ("entries", 2, field.TYPE_MESSAGE, repeated, ".logproto.EntryAdapter"),
            ("hash", 3, field.TYPE_UINT64, optional, ""),
        ],
        "LabelPairAdapter": [
            ("name", 1, field.TYPE_STRING, optional, ""),
            ("value", 2, field.TYPE_STRING, optional, ""),
        ],
        "EntryAdapter": [
            ("timestamp", 1, field.TYPE_MESSAGE, optional, ".google.protobuf.Timestamp"),
            ("line", 2, field.TYPE_STRING, optional, ""),
            (
                "structuredMetadata",
                3,
                field.TYPE_MESSAGE,
                repeated,
                ".logproto.LabelPairAdapter",
            ),
        ],
    }
    for name, fields in shapes.items():
        message = proto.message_type.add(name=name)
        for field_name, number, kind, label, type_name in fields:
            added = message.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                added.type_name = type_name
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(proto)
    return tuple(  # type: ignore[return-value]
        message_factory.GetMessageClass(pool.FindMessageTypeByName(f"logproto.{name}"))
        for name in ("PushRequest", "StreamAdapter", "EntryAdapter")
    )


PushRequest, StreamAdapter, EntryAdapter = _push_classes()
# Field numbers: PushRequest.streams, StreamAdapter.entries.
_STREAMS, _ENTRIES = 1, 2
# A stream's entries as messages, with the label that names them in errors (streams[2].values).
Stream = tuple[str, list[Message]]

LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_PAIR = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*([,}])', re.DOTALL)
_ESCAPE = re.compile(
    r"\\(?:([abfnrtv\\\"'])|x([0-9a-fA-F]{2})|([0-7]{3})|u([0-9a-fA-F]{4})|"
    r"U([0-9a-fA-F]{8})|(.))",
    re.DOTALL,
)
_SIMPLE_ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11}


class LabelError(ValueError):
    """Why a label text is not a Prometheus label set."""


def parse_labels(text: str) -> dict[str, str]:
    """``{job="api", owner="acme"}``: names as Prometheus has them, values double-quoted with
    Go's escapes. Strict: anything else, or a name twice, is a LabelError."""
    start = text.find("{")
    if start < 0 or text[:start].strip():
        raise LabelError("must start with {")
    labels: dict[str, str] = {}
    position = start + 1
    if text[position:].lstrip().startswith("}"):
        position = text.index("}", position) + 1
    else:
        while True:
            match = _PAIR.match(text, position)
            if match is None:
                raise LabelError(f'has no name="value" pair at character {position}')
            name, quoted, after = match.groups()
            if name in labels:
                raise LabelError(f"names {name} twice")
            labels[name] = _unquote(quoted)
            position = match.end()
            if after == "}":
                break
            rest = text[position:].lstrip()
            if rest.startswith("}"):  # a trailing comma, as Prometheus allows
                position = text.index("}", position) + 1
                break
    if text[position:].strip():
        raise LabelError(f"goes on after its closing }} at character {position}")
    return labels


def _unquote(quoted: str) -> str:
    if "\\" not in quoted:
        return quoted
    out = bytearray()
    position = 0
    for match in _ESCAPE.finditer(quoted):
        out += quoted[position : match.start()].encode()
        simple, hex_byte, octal, short, long, other = match.groups()
        if other is not None:
            raise LabelError(f"has an unknown escape \\{other} in a value")
        if simple is not None:
            out.append(_SIMPLE_ESCAPES.get(simple, ord(simple)))
        elif hex_byte is not None or octal is not None:
            value = int(hex_byte, 16) if hex_byte is not None else int(octal, 8)
            if value > 255:
                raise LabelError("has an octal escape above \\377 in a value")
            out.append(value)
        else:
            point = int(short or long, 16)
            if point > 0x10FFFF or 0xD800 <= point <= 0xDFFF:
                raise LabelError("has an escape that is no Unicode character in a value")
            out += chr(point).encode()
        position = match.end()
    out += quoted[position:].encode()
    try:
        return out.decode()
    except UnicodeDecodeError:
        raise LabelError("has a value that is not UTF-8 once unescaped") from None


def _stream_parts(
    labels: dict[str, str], owner_labels: Sequence[str], where: str
) -> tuple[str, dict[str, Any] | None]:
    """The stream's owner, and its other labels as attrs."""
    for name in owner_labels:
        if name in labels:
            others = {k: v for k, v in labels.items() if k != name}
            return labels[name], ({"labels": others} if others else None)
    names = ", ".join(owner_labels)
    raise BadRequest(f"{where}: the stream has none of the owner labels ({names})", where)


def _ts(nanos: int, where: str) -> datetime:
    try:
        return from_unix_nanos(nanos)
    except TimestampError as exc:
        raise BadRequest(f"{where}: the timestamp {exc}", where) from None


def _with_metadata(attrs: dict[str, Any] | None, metadata: dict[str, str]) -> dict[str, Any]:
    return {**attrs, "metadata": metadata} if attrs else {"metadata": metadata}


Data = bytes | bytearray | memoryview


def decode_protobuf(
    data: Data, owner_labels: Sequence[str], allowance: Allowance | None = None
) -> list[Stream]:
    """The messages of a (decompressed) protobuf PushRequest, stream by stream, each entry
    measured and counted against ``allowance`` (by default the write API's default limits,
    nothing charged) before it is parsed."""
    return run(protobuf_steps(data, owner_labels, allowance))


def protobuf_steps(
    data: Data, owner_labels: Sequence[str], allowance: Allowance | None = None
) -> Steps[list[Stream]]:
    """``decode_protobuf`` in steps (router/protocols/allowance.py)."""
    allowance = allowance or Allowance.of(IngestSettings(), label="streams")
    view = memoryview(data)
    try:
        _, bounds = wire.split(view, 0, len(view), _STREAMS)
        streams = []
        for number, where in enumerate(bounds):
            streams.append((yield from _stream(view, number, where, owner_labels, allowance)))
        return streams
    except (wire.WireError, DecodeError) as exc:
        raise BadRequest(f"the body is not a Loki PushRequest: {exc}", "body") from None


def _stream(
    view: memoryview, number: int, bounds: range, owner_labels: Sequence[str], allowance: Allowance
) -> Steps[Stream]:
    where = f"streams[{number}].labels"
    rest, entries = wire.split(view, bounds.start, bounds.stop, _ENTRIES)
    allowance.part(where, sum(map(len, rest)))
    stream = StreamAdapter.FromString(wire.join(view, rest))
    try:
        labels = parse_labels(stream.labels)
    except LabelError as exc:
        raise BadRequest(f"{where} {excerpt(stream.labels)} {exc}", where) from None
    allowance.attributes(where, len(labels))
    owner, attrs = _stream_parts(labels, owner_labels, where)
    messages: list[Message] = []
    append = messages.append
    for index, entry_bounds in enumerate(entries):
        entry_where = f"streams[{number}].entries[{index}]"
        allowance.record(entry_where, len(entry_bounds))
        entry = EntryAdapter.FromString(view[entry_bounds.start : entry_bounds.stop])
        stamp = entry.timestamp
        nanos = stamp.seconds * 1_000_000_000 + stamp.nanos
        ts = _ts(nanos, f"{entry_where}.timestamp")
        pairs = entry.structuredMetadata
        if pairs:
            allowance.attributes(f"{entry_where}.structuredMetadata", len(pairs))
            metadata = {pair.name: pair.value for pair in pairs}
            append(Message(owner, ts, entry.line, _with_metadata(attrs, metadata)))
        else:
            append(Message(owner, ts, entry.line, attrs))
        if allowance.decoded(len(entry_bounds), len(pairs)):
            yield
    return f"streams[{number}].entries", messages


def decode_json(
    data: Data, owner_labels: Sequence[str], allowance: Allowance | None = None
) -> list[Stream]:
    """The messages of a JSON push: ``{"streams": [{"stream": {labels}, "values": [["<unix
    ns>", "<line>"], ["<unix ns>", "<line>", {structured metadata}]]}]}``, each entry counted
    against ``allowance`` as in ``decode_protobuf``."""
    return run(json_steps(data, owner_labels, allowance))


def json_steps(
    data: Data, owner_labels: Sequence[str], allowance: Allowance | None = None
) -> Steps[list[Stream]]:
    """``decode_json`` in steps."""
    allowance = allowance or Allowance.of(IngestSettings(), label="streams")
    try:
        push = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BadRequest(f"the body is not JSON: {exc.msg}", "body") from None
    if not isinstance(push, dict) or not isinstance(push.get("streams"), list):
        raise BadRequest('the body must be a JSON object with a "streams" array', "body")
    streams: list[Stream] = []
    for number, stream in enumerate(push["streams"]):
        where = f"streams[{number}]"
        if not isinstance(stream, dict):
            raise BadRequest(f"{where} must be a JSON object", where)
        labels = _string_map(stream.get("stream"), f"{where}.stream", names=True)
        allowance.attributes(f"{where}.stream", len(labels))
        owner, attrs = _stream_parts(labels, owner_labels, f"{where}.stream")
        values = stream.get("values")
        if not isinstance(values, list):
            raise BadRequest(f"{where}.values must be an array", f"{where}.values")
        messages: list[Message] = []
        for index, value in enumerate(values):
            entry = f"{where}.values[{index}]"
            if not isinstance(value, list) or len(value) not in (2, 3):
                raise BadRequest(
                    f'{entry} must be ["<unix ns>", "<line>"] or ["<unix ns>", "<line>", '
                    "{structured metadata}]",
                    entry,
                )
            nanos, line = value[0], value[1]
            if isinstance(nanos, str) and nanos.isascii() and nanos.isdigit():
                nanos = int(nanos)
            if type(nanos) is not int:
                raise BadRequest(f"{entry}: the timestamp must be a string of digits", entry)
            if not isinstance(line, str):
                raise BadRequest(f"{entry}: the line must be a string", entry)
            # Characters, not bytes: never more than the line's UTF-8 takes.
            allowance.record(entry, len(line))
            entry_attrs = attrs
            metadata: dict[str, str] = {}
            if len(value) == 3:
                metadata = _string_map(value[2], f"{entry}[2]", names=False)
                allowance.attributes(f"{entry}[2]", len(metadata))
                entry_attrs = _with_metadata(attrs, metadata) if metadata else attrs
            messages.append(Message(owner, _ts(nanos, entry), line, entry_attrs))
            if allowance.decoded(len(line), len(metadata)):
                yield
        streams.append((f"{where}.values", messages))
    return streams


def _string_map(value: Any, where: str, names: bool) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise BadRequest(f"{where} must be a JSON object of strings", where)
    if names:
        for name in value:
            if not LABEL_NAME.fullmatch(name):
                raise BadRequest(f"{where}: {excerpt(name)} is not a label name", where)
    return value
