"""Template and options template sets of NetFlow v9 (RFC 3954 §5.2, §6.1) and IPFIX
(RFC 7011 §3.4), parsed into templates and withdrawals. Malformed for anything that does not
fit: a template running past its set, a template id below 256, an impossible scope count."""

from __future__ import annotations

from typing import NamedTuple

from router.collector.elements import ENTERPRISE_BIT
from router.collector.templates import MIN_TEMPLATE_ID, Field, Template
from router.collector.wire import Malformed

IPFIX_TEMPLATE_SET = 2
IPFIX_OPTIONS_TEMPLATE_SET = 3
V9_TEMPLATE_SET = 0
V9_OPTIONS_TEMPLATE_SET = 1
MIN_DATA_SET_ID = MIN_TEMPLATE_ID
# A set ends with padding shorter than its smallest record: a template header of 4 octets.
_TEMPLATE_HEADER = 4


class Withdrawal(NamedTuple):
    """IPFIX template withdrawal: of one template id, or of every template (or every options
    template) of the domain when template_id is the set's own id."""

    template_id: int
    options: bool

    @property
    def everything(self) -> bool:
        return self.template_id in (IPFIX_TEMPLATE_SET, IPFIX_OPTIONS_TEMPLATE_SET)


def _u16(data: bytes, offset: int) -> int:
    return (data[offset] << 8) | data[offset + 1]


def _check(template: Template) -> Template:
    if template.template_id < MIN_TEMPLATE_ID:
        raise Malformed("template id below 256")
    if template.min_record_length == 0:
        raise Malformed("template of empty records")
    return template


def ipfix_templates(
    data: bytes, start: int, end: int, options: bool
) -> list[Template | Withdrawal]:
    found: list[Template | Withdrawal] = []
    offset = start
    while end - offset >= _TEMPLATE_HEADER:
        template_id, count = _u16(data, offset), _u16(data, offset + 2)
        offset += 4
        if count == 0:
            withdrawal = Withdrawal(template_id, options)
            if template_id < MIN_TEMPLATE_ID and not withdrawal.everything:
                raise Malformed("template id below 256")
            found.append(withdrawal)
            continue
        scope_count = 0
        if options:
            if end - offset < 2:
                raise Malformed("template beyond set")
            scope_count = _u16(data, offset)
            offset += 2
            if not 0 < scope_count <= count:
                raise Malformed("bad scope field count")
        fields = []
        for _ in range(count):
            if end - offset < 4:
                raise Malformed("template beyond set")
            element, length = _u16(data, offset), _u16(data, offset + 2)
            offset += 4
            enterprise = 0
            if element & ENTERPRISE_BIT:
                if end - offset < 4:
                    raise Malformed("template beyond set")
                enterprise = int.from_bytes(data[offset : offset + 4])
                element &= ~ENTERPRISE_BIT
                offset += 4
            fields.append(Field(element, enterprise, length))
        found.append(_check(Template(template_id, tuple(fields), options, scope_count)))
    return found


def _v9_fields(data: bytes, offset: int, end: int, count: int) -> tuple[tuple[Field, ...], int]:
    if end - offset < 4 * count:
        raise Malformed("template beyond set")
    fields = tuple(
        Field(_u16(data, at), 0, _u16(data, at + 2)) for at in range(offset, offset + 4 * count, 4)
    )
    return fields, offset + 4 * count


def v9_templates(data: bytes, start: int, end: int) -> list[Template]:
    found = []
    offset = start
    while end - offset >= _TEMPLATE_HEADER:
        template_id, count = _u16(data, offset), _u16(data, offset + 2)
        if count == 0:
            raise Malformed("template without fields")
        fields, offset = _v9_fields(data, offset + 4, end, count)
        found.append(_check(Template(template_id, fields)))
    return found


def v9_options_templates(data: bytes, start: int, end: int) -> list[Template]:
    """Scope fields come first; their types (system, interface, ...) are not elements."""
    found = []
    offset = start
    # Template id, scope length and option length, then at least one field.
    while end - offset >= 10:
        template_id = _u16(data, offset)
        scope_length, option_length = _u16(data, offset + 2), _u16(data, offset + 4)
        if scope_length % 4 or option_length % 4 or option_length == 0:
            raise Malformed("bad options template lengths")
        scope_count = scope_length // 4
        fields, offset = _v9_fields(data, offset + 6, end, scope_count + option_length // 4)
        found.append(_check(Template(template_id, fields, True, scope_count)))
    return found
