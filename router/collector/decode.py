"""Datagrams of NetFlow v5, v9 and IPFIX into flow records.

A message is all or nothing: its sets are decoded into a staging area (templates learnt,
withdrawals, options, held sets, records) and only a message that parsed to its end changes the
decoder's state or returns records. A malformed one is reported with a short reason and leaves
no trace, since nothing in a damaged datagram can be trusted, the templates it carries included.
Nothing here raises on any input: every read is bounds-checked and a failure is a Malformed.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from router.collector.clock import Clock
from router.collector.datasets import flow_records, options_values
from router.collector.flows import FlowRecord
from router.collector.held import HeldSet, HeldSets
from router.collector.layout import compile_layout
from router.collector.sampling import DomainOptions
from router.collector.sets import (
    IPFIX_OPTIONS_TEMPLATE_SET,
    IPFIX_TEMPLATE_SET,
    MIN_DATA_SET_ID,
    V9_OPTIONS_TEMPLATE_SET,
    V9_TEMPLATE_SET,
    Withdrawal,
    ipfix_templates,
    v9_options_templates,
    v9_templates,
)
from router.collector.templates import Template, TemplateCache
from router.collector.v5 import decode_v5
from router.collector.wire import Malformed

V5, V9, IPFIX = 5, 9, 10
# version, count, sysUptime, unix_secs, packet sequence, source id
V9_HEADER = struct.Struct(">HHIIII")
# version, length, export time, sequence number, observation domain id
IPFIX_HEADER = struct.Struct(">HHIII")
SET_HEADER = 4


@dataclass(slots=True)
class Decoded:
    """What one datagram gave. flows_expected is how many records the message accounts for in
    its header's sequence (see Sequences); None when a held set's records could not be
    counted. Records of sets held earlier and decoded now are in records (held_released counts
    those sets), not in flows_expected."""

    version: int
    records: list[FlowRecord] = field(default_factory=list)
    malformed: bool = False
    reason: str = ""
    domain: int = 0
    sequence: int = 0
    flows_expected: int | None = None
    sets_held: int = 0
    options_applied: int = 0
    # Data records of templates without addresses: counted, never flows.
    records_skipped: int = 0
    held_released: int = 0
    # Held sets that did not parse under the template that came for them.
    held_invalid: int = 0
    # A v9 header whose count is not the records the message holds (softflowd 1.1.0 sends
    # such): noted, not a reason to drop it, since every set parsed by its own lengths.
    count_mismatch: bool = False

    @property
    def records_decoded(self) -> int:
        return len(self.records)


class _Header(NamedTuple):
    domain: int
    sequence: int
    record_count: int | None
    export_ms: int
    uptime_ms: int | None
    size: int


def _v9_header(data: bytes) -> _Header:
    if len(data) < V9_HEADER.size:
        raise Malformed("truncated header")
    _, count, uptime, secs, sequence, source_id = V9_HEADER.unpack_from(data)
    return _Header(source_id, sequence, count, secs * 1000, uptime, V9_HEADER.size)


def _ipfix_header(data: bytes) -> _Header:
    if len(data) < IPFIX_HEADER.size:
        raise Malformed("truncated header")
    _, length, export_s, sequence, domain = IPFIX_HEADER.unpack_from(data)
    if length != len(data):
        raise Malformed("message length mismatch")
    return _Header(domain, sequence, None, export_s * 1000, None, IPFIX_HEADER.size)


def _sets(data: bytes, offset: int) -> Iterator[tuple[int, int, int]]:
    """(set id, start, end) of each set's body; sets fill the message to its last octet."""
    while offset < len(data):
        if len(data) - offset < SET_HEADER:
            raise Malformed("truncated set header")
        set_id, length = struct.unpack_from(">HH", data, offset)
        if length < SET_HEADER:
            raise Malformed("set length below 4")
        if offset + length > len(data):
            raise Malformed("set length beyond message")
        yield set_id, offset + SET_HEADER, offset + length
        offset += length


class Decoder:
    def __init__(
        self,
        templates: TemplateCache | None = None,
        *,
        hold_s: float = 30.0,
        hold_bytes: int = 1 << 20,
        max_domains: int = 65536,
    ) -> None:
        self.templates = TemplateCache() if templates is None else templates
        self.held = HeldSets(hold_s, hold_bytes)
        self.max_domains = max_domains
        self._options: OrderedDict[tuple[str, int], DomainOptions] = OrderedDict()

    def decode(self, exporter: str, data: bytes, now: float) -> Decoded:
        version = int.from_bytes(data[:2]) if len(data) >= 2 else 0
        try:
            if version == V5:
                head, records = decode_v5(data)
                return Decoded(
                    V5,
                    records,
                    domain=head.domain,
                    sequence=head.flow_sequence,
                    flows_expected=head.record_count,
                )
            if version in (V9, IPFIX):
                return self._decode_templated(exporter, data, now, version)
            raise Malformed("truncated header" if len(data) < 2 else "unknown version")
        except Malformed as exc:
            return Decoded(version, malformed=True, reason=str(exc))
        except OverflowError:
            return Decoded(version, malformed=True, reason="time out of range")

    def expire(self, now: float) -> dict[str, int]:
        """Drops stale templates and held sets; per exporter, the held sets dropped (stale, or
        pushed out by the bound on held octets) since the last call."""
        self.templates.expire(now)
        return self.held.expire(now)

    def options_state(self) -> list[dict[str, Any]]:
        """What options records told, per (exporter, domain), as JSON-able values: saved with
        the templates, so that sampled flows after a restart are scaled before the exporter
        sends its options again."""
        return [
            {
                "exporter": exporter,
                "domain": domain,
                "rate": options.rate,
                "sampler_rates": [[k, v] for k, v in options.sampler_rates.items()],
                "init_ms": options.init_ms,
            }
            for (exporter, domain), options in self._options.items()
        ]

    def load_options(self, state: Any) -> None:
        """Options saved by options_state; ValueError when the state is damaged."""
        try:
            for entry in state:
                options = DomainOptions(
                    _positive(entry["rate"]),
                    {int(k): _positive(v) for k, v in entry["sampler_rates"]},
                    None if entry["init_ms"] is None else int(entry["init_ms"]),
                )
                self._keep_options(str(entry["exporter"]), int(entry["domain"]), options)
        except (TypeError, KeyError, ValueError) as exc:
            raise ValueError(f"saved options are damaged: {exc}") from None

    def domain_options(self, exporter: str, domain: int) -> DomainOptions:
        """What options records told of a domain so far (a copy: changing it changes nothing)."""
        known = self._options.get((exporter, domain))
        return DomainOptions() if known is None else known.copy()

    def _decode_templated(self, exporter: str, data: bytes, now: float, version: int) -> Decoded:
        head = _v9_header(data) if version == V9 else _ipfix_header(data)
        message = _Message(self, exporter, data, version, head, now)
        for set_id, start, end in _sets(data, head.size):
            message.add_set(set_id, start, end)
        decoded = self._commit(message)
        decoded.count_mismatch = (
            head.record_count is not None
            and message.complete
            and message.counted != head.record_count
        )
        return decoded

    def _commit(self, message: _Message) -> Decoded:
        exporter, head = message.exporter, message.head
        for change in message.changes:
            if isinstance(change, Template):
                self.templates.add(exporter, head.domain, change, message.now)
            elif change.everything:
                self.templates.withdraw_all(exporter, head.domain, change.options)
            else:
                self.templates.withdraw(exporter, head.domain, change.template_id)
        if message.options_changed:
            self._keep_options(exporter, head.domain, message.options)
        for held in message.holds:
            self.held.hold(exporter, held)
        decoded = Decoded(
            message.version,
            message.records,
            domain=head.domain,
            sequence=head.sequence,
            flows_expected=head.record_count if message.version == V9 else message.data_records,
            sets_held=len(message.holds),
            options_applied=message.options_applied,
            records_skipped=message.records_skipped,
        )
        if message.version == IPFIX and not message.complete:
            decoded.flows_expected = None
        for template in message.staged.values():
            if template is not None:
                for held in self.held.release(exporter, head.domain, template.template_id):
                    self._decode_held(exporter, held, template, decoded)
        return decoded

    def _decode_held(
        self, exporter: str, held: HeldSet, template: Template, decoded: Decoded
    ) -> None:
        options = self._options.get((exporter, held.domain)) or DomainOptions()
        try:
            if template.options:
                options = options.copy()
                for values in options_values(template, held.body, 0, len(held.body)):
                    decoded.options_applied += options.apply(values)
                self._keep_options(exporter, held.domain, options)
            else:
                init_ms = options.init_ms if held.version == IPFIX else None
                clock = Clock(held.export_ms, held.uptime_ms, init_ms)
                layout = compile_layout(template.fields)
                records, count = flow_records(layout, held.body, 0, len(held.body), clock, options)
                decoded.records.extend(records)
                decoded.records_skipped += count - len(records)
            decoded.held_released += 1
        except (Malformed, OverflowError):
            decoded.held_invalid += 1

    def _keep_options(self, exporter: str, domain: int, options: DomainOptions) -> None:
        self._options[(exporter, domain)] = options
        self._options.move_to_end((exporter, domain))
        while len(self._options) > self.max_domains:
            self._options.popitem(last=False)


class _Message:
    """The staging area of one v9 or IPFIX message: what it would change, kept apart from the
    decoder until the whole message parsed."""

    def __init__(
        self, decoder: Decoder, exporter: str, data: bytes, version: int, head: _Header, now: float
    ) -> None:
        self.decoder = decoder
        self.exporter = exporter
        self.data = data
        self.version = version
        self.head = head
        self.now = now
        # Templates learnt (or withdrawn: None) by this message, by template id.
        self.staged: dict[int, Template | None] = {}
        # Whether options templates (True) or data templates (False) were all withdrawn.
        self.cleared: set[bool] = set()
        self.changes: list[Template | Withdrawal] = []
        self.options = decoder._options.get((exporter, head.domain)) or DomainOptions()
        self.options_changed = False
        self.holds: list[HeldSet] = []
        self.records: list[FlowRecord] = []
        # Records of every kind (v9's header count counts templates too), and data records.
        self.counted = 0
        self.data_records = 0
        self.records_skipped = 0
        self.options_applied = 0
        # False once a held set leaves records uncounted.
        self.complete = True

    def template(self, template_id: int) -> Template | None:
        if template_id in self.staged:
            return self.staged[template_id]
        found = self.decoder.templates.get(self.exporter, self.head.domain, template_id, self.now)
        if found is not None and found.options in self.cleared:
            return None
        return found

    def add_set(self, set_id: int, start: int, end: int) -> None:
        if set_id >= MIN_DATA_SET_ID:
            self._data_set(set_id, start, end)
        elif self.version == V9 and set_id == V9_TEMPLATE_SET:
            self._learn(v9_templates(self.data, start, end))
        elif self.version == V9 and set_id == V9_OPTIONS_TEMPLATE_SET:
            self._learn(v9_options_templates(self.data, start, end))
        elif self.version == IPFIX and set_id in (IPFIX_TEMPLATE_SET, IPFIX_OPTIONS_TEMPLATE_SET):
            options = set_id == IPFIX_OPTIONS_TEMPLATE_SET
            self._learn(ipfix_templates(self.data, start, end, options))
        # Other set ids are reserved: skipped by their length.

    def _learn(self, changes: list[Template] | list[Template | Withdrawal]) -> None:
        for change in changes:
            self.changes.append(change)
            if isinstance(change, Template):
                self.staged[change.template_id] = change
                self.counted += 1
            elif change.everything:
                self.cleared.add(change.options)
                for template_id, staged in self.staged.items():
                    if staged is not None and staged.options == change.options:
                        self.staged[template_id] = None
            else:
                self.staged[change.template_id] = None

    def _data_set(self, template_id: int, start: int, end: int) -> None:
        template = self.template(template_id)
        head = self.head
        if template is None:
            body = self.data[start:end]
            self.holds.append(
                HeldSet(
                    head.domain,
                    template_id,
                    self.version,
                    body,
                    head.export_ms,
                    head.uptime_ms,
                    self.now,
                )
            )
            self.complete = False
        elif template.options:
            if not self.options_changed:
                self.options = self.options.copy()
                self.options_changed = True
            found = options_values(template, self.data, start, end)
            self.options_applied += sum(self.options.apply(values) for values in found)
            self.counted += len(found)
            self.data_records += len(found)
        else:
            init_ms = self.options.init_ms if self.version == IPFIX else None
            clock = Clock(head.export_ms, head.uptime_ms, init_ms)
            layout = compile_layout(template.fields)
            records, count = flow_records(layout, self.data, start, end, clock, self.options)
            self.records.extend(records)
            self.counted += count
            self.data_records += count
            self.records_skipped += count - len(records)


def _positive(value: Any) -> int:
    number = int(value)
    if number < 1:
        raise ValueError(f"a sampling rate of {number}")
    return number
