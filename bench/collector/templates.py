"""Template and options-template sets of NetFlow v9 (RFC 3954) and IPFIX (RFC 7011) datagrams,
decoded by hand (no collector code): which fields an exporter announces."""

from __future__ import annotations

import struct
from dataclasses import dataclass

# The information elements softflowd and pmacct announce, named as IANA's IPFIX registry names
# them (v9's field types 1-79 share the numbers).
NAMES = {
    1: "octetDeltaCount",
    2: "packetDeltaCount",
    4: "protocolIdentifier",
    5: "ipClassOfService",
    6: "tcpControlBits",
    7: "sourceTransportPort",
    8: "sourceIPv4Address",
    9: "sourceIPv4PrefixLength",
    10: "ingressInterface",
    11: "destinationTransportPort",
    12: "destinationIPv4Address",
    13: "destinationIPv4PrefixLength",
    14: "egressInterface",
    15: "ipNextHopIPv4Address",
    16: "bgpSourceAsNumber",
    17: "bgpDestinationAsNumber",
    21: "flowEndSysUpTime",
    22: "flowStartSysUpTime",
    27: "sourceIPv6Address",
    28: "destinationIPv6Address",
    31: "flowLabelIPv6",
    32: "icmpTypeCodeIPv4",
    34: "samplingInterval",
    35: "samplingAlgorithm",
    48: "samplerId",
    49: "samplerMode",
    50: "samplerRandomInterval",
    56: "sourceMacAddress",
    58: "vlanId",
    60: "ipVersion",
    61: "flowDirection",
    80: "destinationMacAddress",
    82: "interfaceName",
    136: "flowEndReason",
    143: "meteringProcessId",
    139: "icmpTypeCodeIPv6",
    144: "exportingProcessId",
    145: "templateId",
    148: "flowId",
    149: "observationDomainId",
    150: "flowStartSeconds",
    151: "flowEndSeconds",
    152: "flowStartMilliseconds",
    153: "flowEndMilliseconds",
    154: "flowStartMicroseconds",
    155: "flowEndMicroseconds",
    156: "flowStartNanoseconds",
    157: "flowEndNanoseconds",
    160: "systemInitTimeMilliseconds",
    161: "flowDurationMilliseconds",
    176: "icmpTypeIPv4",
    177: "icmpCodeIPv4",
    178: "icmpTypeIPv6",
    179: "icmpCodeIPv6",
    210: "paddingOctets",
    239: "biflowDirection",
    302: "selectorId",
    304: "selectorAlgorithm",
    305: "samplingPacketInterval",
    306: "samplingPacketSpace",
}
# A v9 options template's scope fields have types of their own (RFC 3954 section 6.1).
V9_SCOPES = {1: "System", 2: "Interface", 3: "Line Card", 4: "Cache", 5: "Template"}
REVERSE_PEN = 29305  # RFC 5103: reverse-direction elements, enterprise bit set


@dataclass(frozen=True)
class Field:
    element: int
    length: int
    enterprise: int | None = None
    v9_scope: bool = False

    @property
    def name(self) -> str:
        if self.v9_scope:
            return f"{V9_SCOPES.get(self.element, self.element)} (v9 scope type {self.element})"
        base = NAMES.get(self.element, f"element {self.element}")
        if self.enterprise == REVERSE_PEN:
            return f"reverse {base}"
        return base if self.enterprise is None else f"{base} (enterprise {self.enterprise})"


@dataclass(frozen=True)
class Template:
    template_id: int
    scope: tuple[Field, ...]  # empty for a data template
    fields: tuple[Field, ...]

    @property
    def options(self) -> bool:
        return bool(self.scope)


def templates(datagram: bytes) -> list[Template]:
    """Every (options) template a v9 or IPFIX datagram defines; [] for other versions."""
    version = int.from_bytes(datagram[:2])
    if version not in (9, 10):
        return []
    offset, found = (20 if version == 9 else 16), []
    while offset + 4 <= len(datagram):
        set_id, length = struct.unpack_from("!HH", datagram, offset)
        if length < 4:
            break
        body = datagram[offset + 4 : offset + length]
        if set_id in (0, 2):
            found += _data_templates(body, ipfix=version == 10)
        elif set_id in (1, 3):
            found += _options_templates(body, ipfix=version == 10)
        offset += length
    return found


def _fields(body: bytes, at: int, count: int, ipfix: bool) -> tuple[tuple[Field, ...], int]:
    fields = []
    for _ in range(count):
        element, length = struct.unpack_from("!HH", body, at)
        at += 4
        enterprise = None
        if ipfix and element & 0x8000:
            (enterprise,) = struct.unpack_from("!I", body, at)
            element &= 0x7FFF
            at += 4
        fields.append(Field(element, length, enterprise))
    return tuple(fields), at


def _data_templates(body: bytes, ipfix: bool) -> list[Template]:
    found, at = [], 0
    while at + 4 <= len(body):
        template_id, count = struct.unpack_from("!HH", body, at)
        if template_id < 256:  # padding
            break
        fields, at = _fields(body, at + 4, count, ipfix)
        found.append(Template(template_id, (), fields))
    return found


def _options_templates(body: bytes, ipfix: bool) -> list[Template]:
    found, at = [], 0
    while at + 6 <= len(body):
        template_id, first, second = struct.unpack_from("!HHH", body, at)
        if template_id < 256:
            break
        at += 6
        if ipfix:  # field count, scope field count
            scope, at = _fields(body, at, second, ipfix)
            fields, at = _fields(body, at, first - second, ipfix)
        else:  # scope length, option length, in bytes
            scope, at = _fields(body, at, first // 4, ipfix)
            scope = tuple(Field(f.element, f.length, v9_scope=True) for f in scope)
            fields, at = _fields(body, at, second // 4, ipfix)
            at += (4 - at % 4) % 4  # v9 pads each options template to 32 bits
        found.append(Template(template_id, scope, fields))
    return found
