"""What options records tell about an observation domain: its sampling rates (one for the
domain, one per sampler id) and, for IPFIX, the exporter's system init time."""

from __future__ import annotations

from dataclasses import dataclass, field

from router.collector.elements import Element

OPTION_ELEMENTS = frozenset(
    {
        Element.SAMPLING_INTERVAL,
        Element.SAMPLER_ID,
        Element.SAMPLER_RANDOM_INTERVAL,
        Element.SAMPLING_PACKET_INTERVAL,
        Element.SAMPLING_PACKET_SPACE,
        Element.SYSTEM_INIT_TIME_MILLISECONDS,
    }
)


@dataclass(slots=True)
class DomainOptions:
    rate: int = 1
    sampler_rates: dict[int, int] = field(default_factory=dict)
    init_ms: int | None = None

    def copy(self) -> DomainOptions:
        return DomainOptions(self.rate, dict(self.sampler_rates), self.init_ms)

    def apply(self, values: dict[int, int]) -> bool:
        """Takes in one options record's values; whether it told anything."""
        applied = False
        init_ms = values.get(Element.SYSTEM_INIT_TIME_MILLISECONDS)
        if init_ms is not None:
            self.init_ms = init_ms
            applied = True
        rate = sampling_rate(values)
        if rate is not None:
            sampler = values.get(Element.SAMPLER_ID)
            if sampler is None:
                self.rate = rate
            else:
                self.sampler_rates[sampler] = rate
            applied = True
        return applied


def sampling_rate(values: dict[int, int]) -> int | None:
    """One in how many packets were sampled: samplingPacketInterval of every
    interval + samplingPacketSpace packets (RFC 5477), else samplerRandomInterval (v9), else
    samplingInterval. None when the record names no rate (or a rate of 0, meaning none)."""
    interval = values.get(Element.SAMPLING_PACKET_INTERVAL)
    if interval:
        space = values.get(Element.SAMPLING_PACKET_SPACE, 0)
        return max(1, round((interval + space) / interval))
    rate = values.get(Element.SAMPLER_RANDOM_INTERVAL) or values.get(Element.SAMPLING_INTERVAL)
    return rate or None
