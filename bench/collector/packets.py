"""Encoders of NetFlow v5, v9 and IPFIX messages, the exporter's side of the decoder.

Templates are lists of fields and records are dicts from element id to value, so a message
can carry anything an exporter might send: reduced-size integers, variable-length and
enterprise fields, options records. An integer value is written in its field's length (a
reduced-size encoding when the length is short); bytes are written as they are (and prefixed
with their length in a variable-length field). A field absent from a record is zeros.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

VARIABLE_LENGTH = 65535
ENTERPRISE_BIT = 0x8000

Value = int | bytes
Record = Mapping[int, Value]


@dataclass(frozen=True)
class FieldSpec:
    element: int
    length: int
    enterprise: int = 0


@dataclass(frozen=True)
class TemplateSpec:
    template_id: int
    fields: Sequence[FieldSpec]
    # Options templates: how many leading fields are scope fields (0 for a data template).
    scope_count: int = 0


def fields(*pairs: tuple[int, int]) -> list[FieldSpec]:
    """Fields from (element, length) pairs."""
    return [FieldSpec(element, length) for element, length in pairs]


def _pad(body: bytes, padding: int) -> bytes:
    return body + bytes(padding)


def _set(set_id: int, body: bytes, padding: int = 0) -> bytes:
    body = _pad(body, padding)
    return struct.pack(">HH", set_id, len(body) + 4) + body


def encode_value(value: Value, length: int) -> bytes:
    if length == VARIABLE_LENGTH:
        raw = (
            value
            if isinstance(value, bytes)
            else value.to_bytes(max(1, -(-value.bit_length() // 8)))
        )
        prefix = bytes([len(raw)]) if len(raw) < 255 else b"\xff" + len(raw).to_bytes(2)
        return prefix + raw
    if isinstance(value, bytes):
        return value[:length].ljust(length, b"\0")
    return value.to_bytes(length)


def encode_record(template: TemplateSpec, record: Record) -> bytes:
    return b"".join(
        encode_value(record.get(f.element, b"" if f.length == VARIABLE_LENGTH else 0), f.length)
        for f in template.fields
    )


def data_set(template: TemplateSpec, records: Sequence[Record], padding: int = 0) -> bytes:
    """A data set of either protocol (both put the template id in the set header)."""
    body = b"".join(encode_record(template, record) for record in records)
    return _set(template.template_id, body, padding)


def _ipfix_field(field: FieldSpec) -> bytes:
    if field.enterprise:
        element = field.element | ENTERPRISE_BIT
        return struct.pack(">HHI", element, field.length, field.enterprise)
    return struct.pack(">HH", field.element, field.length)


def ipfix_template_set(templates: Sequence[TemplateSpec], padding: int = 0) -> bytes:
    """A template set (id 2), or an options template set (id 3) when the templates have scope
    fields; all templates of one set are of one kind."""
    options = any(t.scope_count for t in templates)
    body = b""
    for template in templates:
        body += struct.pack(">HH", template.template_id, len(template.fields))
        if options:
            body += struct.pack(">H", template.scope_count)
        body += b"".join(_ipfix_field(f) for f in template.fields)
    return _set(3 if options else 2, body, padding)


def ipfix_withdrawal(template_id: int, options: bool = False) -> bytes:
    """Withdraws one template, or all of the kind when template_id is 2 (3 for options)."""
    return _set(3 if options else 2, struct.pack(">HH", template_id, 0))


def ipfix_message(
    sets: Sequence[bytes], export_s: int, sequence: int = 0, domain: int = 0
) -> bytes:
    body = b"".join(sets)
    return struct.pack(">HHIII", 10, 16 + len(body), export_s, sequence, domain) + body


def v9_template_set(templates: Sequence[TemplateSpec], padding: int = 0) -> bytes:
    body = b"".join(
        struct.pack(">HH", t.template_id, len(t.fields))
        + b"".join(struct.pack(">HH", f.element, f.length) for f in t.fields)
        for t in templates
    )
    return _set(0, body, padding)


def v9_options_template_set(templates: Sequence[TemplateSpec], padding: int = 0) -> bytes:
    body = b""
    for template in templates:
        scope_octets = 4 * template.scope_count
        option_octets = 4 * (len(template.fields) - template.scope_count)
        body += struct.pack(">HHH", template.template_id, scope_octets, option_octets)
        body += b"".join(struct.pack(">HH", f.element, f.length) for f in template.fields)
    return _set(1, body, padding)


def v9_message(
    sets: Sequence[bytes],
    count: int,
    uptime_ms: int,
    export_s: int,
    sequence: int = 0,
    source_id: int = 0,
) -> bytes:
    """count is the header's record count: templates, options and data records together."""
    header = struct.pack(">HHIIII", 9, count, uptime_ms, export_s, sequence, source_id)
    return header + b"".join(sets)


@dataclass(frozen=True)
class V5Flow:
    src: bytes
    dst: bytes
    src_port: int = 0
    dst_port: int = 0
    proto: int = 6
    octets: int = 0
    packets: int = 0
    first_ms: int = 0
    last_ms: int = 0
    tcp_flags: int = 0


V5_RECORD = struct.Struct(">4s4s4sHHIIIIHHxBBBHHBBxx")


def v5_message(
    flows: Sequence[V5Flow],
    uptime_ms: int,
    export_s: int,
    export_ns: int = 0,
    sequence: int = 0,
    engine_type: int = 0,
    engine_id: int = 0,
    sampling: int = 0,
) -> bytes:
    """first_ms and last_ms are sysUptime values, as a v5 exporter sends them; sampling is the
    header's 16 bits (mode in the top 2, interval in the low 14)."""
    header = struct.pack(
        ">HHIIIIBBH",
        5,
        len(flows),
        uptime_ms,
        export_s,
        export_ns,
        sequence,
        engine_type,
        engine_id,
        sampling,
    )
    records = b"".join(
        V5_RECORD.pack(
            f.src,
            f.dst,
            bytes(4),
            0,
            0,
            f.packets,
            f.octets,
            f.first_ms,
            f.last_ms,
            f.src_port,
            f.dst_port,
            f.tcp_flags,
            f.proto,
            0,
            0,
            0,
            0,
            0,
        )
        for f in flows
    )
    return header + records


def flow_template(template_id: int, v6: bool = False) -> TemplateSpec:
    """The template most exporters send: 5-tuple, flags, delta counts, start and end in ms."""
    addresses = ((27, 16), (28, 16)) if v6 else ((8, 4), (12, 4))
    counts = ((7, 2), (11, 2), (4, 1), (6, 1), (1, 8), (2, 8), (152, 8), (153, 8))
    return TemplateSpec(template_id, fields(*addresses, *counts))


def flow_record(
    src: bytes, dst: bytes, src_port: int, dst_port: int, octets: int, start_ms: int, end_ms: int
) -> dict[int, Value]:
    """A TCP flow's values for flow_template (of the family of src)."""
    v6 = len(src) == 16
    return {
        27 if v6 else 8: src,
        28 if v6 else 12: dst,
        7: src_port,
        11: dst_port,
        4: 6,
        6: 0x12,
        1: octets,
        2: max(1, octets // 500),
        152: start_ms,
        153: end_ms,
    }
