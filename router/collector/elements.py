"""The IPFIX information elements (RFC 7012, IANA registry) the decoder reads.

NetFlow v9 field types (RFC 3954) use the same numbers for every element listed here, so one
table serves both. v9 options scopes (1 system .. 5 template) share numbers with elements too,
but none of the scope numbers is an element read from options records, so they never collide.
"""

from __future__ import annotations

from enum import IntEnum


class Element(IntEnum):
    OCTET_DELTA_COUNT = 1
    PACKET_DELTA_COUNT = 2
    PROTOCOL_IDENTIFIER = 4
    TCP_CONTROL_BITS = 6
    SOURCE_TRANSPORT_PORT = 7
    SOURCE_IPV4_ADDRESS = 8
    DESTINATION_TRANSPORT_PORT = 11
    DESTINATION_IPV4_ADDRESS = 12
    FLOW_END_SYS_UP_TIME = 21
    FLOW_START_SYS_UP_TIME = 22
    POST_OCTET_DELTA_COUNT = 23
    POST_PACKET_DELTA_COUNT = 24
    SOURCE_IPV6_ADDRESS = 27
    DESTINATION_IPV6_ADDRESS = 28
    ICMP_TYPE_CODE_IPV4 = 32
    SAMPLING_INTERVAL = 34
    SAMPLER_ID = 48
    SAMPLER_MODE = 49
    SAMPLER_RANDOM_INTERVAL = 50
    OCTET_TOTAL_COUNT = 85
    PACKET_TOTAL_COUNT = 86
    ICMP_TYPE_CODE_IPV6 = 139
    FLOW_START_SECONDS = 150
    FLOW_END_SECONDS = 151
    FLOW_START_MILLISECONDS = 152
    FLOW_END_MILLISECONDS = 153
    FLOW_START_MICROSECONDS = 154
    FLOW_END_MICROSECONDS = 155
    FLOW_START_NANOSECONDS = 156
    FLOW_END_NANOSECONDS = 157
    SYSTEM_INIT_TIME_MILLISECONDS = 160
    SAMPLING_PACKET_INTERVAL = 305
    SAMPLING_PACKET_SPACE = 306


# A field length of 65535 in a template announces a variable-length field (RFC 7011 §7).
VARIABLE_LENGTH = 65535
# The top bit of an IPFIX field's element id says an enterprise number follows (RFC 7011 §3.2).
ENTERPRISE_BIT = 0x8000
# Unsigned integers may be sent in fewer octets than their type (RFC 7011 §6.2).
MAX_UNSIGNED_LENGTH = 8
