"""Templates under a flood (router/collector/templates.py, shares.py): a mapped exporter's
templates are pushed out by nobody else, unmapped exporters share a bound in which the largest
holder gives up its oldest first, and an exporter churning template ids pushes out its own."""

from __future__ import annotations

import random

from bench.collector import packets
from router.collector.decode import Decoder
from router.collector.exporters import ExporterDirectory, ExporterMapping
from router.collector.intake import CollectorMetrics, Intake
from router.collector.queue import FlowQueue
from router.collector.shares import Shares
from router.collector.sink import Exported
from router.collector.templates import Field, Template, TemplateCache

VICTIM = "192.0.2.10"
START_MS = 1_795_000_000_000
NOW_S = START_MS / 1000
FLOODERS = [f"198.51.100.{n}" for n in range(1, 81)]


def _data(template_id: int, domain: int = 5) -> bytes:
    """A data set of 3 flows of template_id, without its template."""
    template = packets.flow_template(template_id)
    flows = [
        packets.flow_record(
            bytes([10, 0, 0, 1]), bytes([10, 0, 1, n]), 40000 + n, 443, 900, START_MS, START_MS
        )
        for n in range(3)
    ]
    return packets.ipfix_message([packets.data_set(template, flows)], START_MS // 1000, 0, domain)


def _templates(template_ids: range, domain: int = 5) -> bytes:
    templates = [packets.flow_template(template_id) for template_id in template_ids]
    return packets.ipfix_message(
        [packets.ipfix_template_set(templates)], START_MS // 1000, 0, domain
    )


def _flood(intake: Intake, exporters: list[str], per_exporter: int = 1024) -> None:
    """Each of ``exporters`` announces ``per_exporter`` templates, 64 to a message."""
    for first in range(256, 256 + per_exporter, 64):
        message = _templates(range(first, first + 64))
        for exporter in exporters:
            intake.message(exporter, message, NOW_S)


def _intake(
    mappings: list[ExporterMapping], unmapped: int = 4096
) -> tuple[Intake, FlowQueue[Exported]]:
    queue: FlowQueue[Exported] = FlowQueue(100_000, batch=100_000, flush_s=60)
    directory = ExporterDirectory(mappings, "name", "system")
    decoder = Decoder(TemplateCache(max_unmapped=unmapped))
    return Intake(decoder, directory, queue, CollectorMetrics()), queue


def test_a_flood_from_80_addresses_cannot_evict_a_mapped_exporters_templates() -> None:
    """80 addresses x 1,024 templates once pushed out a registered exporter's templates: its
    next data set was held and dropped. Now it decodes."""
    intake, queue = _intake([ExporterMapping(VICTIM, None, "edge-10", "acme")])
    intake.message(VICTIM, _templates(range(300, 310)), NOW_S)
    _flood(intake, FLOODERS)
    assert intake.message(VICTIM, _data(305), NOW_S) == 3
    assert {flow.switch for flow in queue._items} == {"edge-10"}
    assert intake._decoder.templates.unmapped_entries == 4096
    assert len(intake._decoder.templates) == 4096 + 10


def test_an_unmapped_exporter_holding_a_few_outlasts_a_flood_of_many() -> None:
    intake, _ = _intake([])
    intake.message(VICTIM, _templates(range(300, 303)), NOW_S)
    _flood(intake, FLOODERS, per_exporter=256)
    assert intake.message(VICTIM, _data(301), NOW_S) == 3
    assert intake._decoder.templates.unmapped_entries == 4096


def test_an_exporter_churning_template_ids_pushes_out_only_its_own() -> None:
    cache = TemplateCache(max_per_exporter=4, max_unmapped=6)
    cache.remap(lambda exporter: exporter == "mapped")
    template = Template(256, (Field(8, 0, 4),))
    cache.add("mapped", 0, template, 0.0)
    cache.add("quiet", 0, template, 0.0)
    for domain in range(100):
        cache.add("churner", domain, template, 1.0 + domain)
        cache.add("mapped", 1000 + domain, template, 1.0 + domain)
    assert cache.get("quiet", 0, 256, 200.0) is not None
    assert cache.unmapped_entries == 5, "the quiet one's and the churner's last 4"
    assert [cache.get("mapped", 1000 + d, 256, 200.0) is not None for d in range(96, 100)] == [
        True
    ] * 4
    assert cache.get("mapped", 0, 256, 200.0) is None, "pushed out by its own"


def test_a_saved_cache_loads_whole_until_the_mappings_are_known() -> None:
    """The state is loaded before the catalog answers: a mapped exporter's saved templates
    beyond the unmapped bound are not lost at start."""
    cache = TemplateCache(max_unmapped=1 << 20)
    template_ids = range(256, 256 + 1000)
    for exporter in ("a", "b"):
        for template_id in template_ids:
            cache.add(exporter, 0, Template(template_id, (Field(8, 0, 4),)), 0.0)
    loaded = TemplateCache.from_state(cache.to_state(), max_unmapped=100)
    assert len(loaded) == 2000
    loaded.remap(lambda exporter: exporter == "a")
    loaded.add("c", 0, Template(256, (Field(8, 0, 4),)), 1.0)
    assert loaded.unmapped_entries == 100
    assert all(loaded.get("a", 0, t, 1.0) is not None for t in template_ids)


def test_shares_find_the_largest_holder_as_a_plain_count_does() -> None:
    shares, counts, rng = Shares(), dict[str, int](), random.Random(9)
    for _ in range(20_000):
        holder = f"h{rng.randrange(30)}"
        action = rng.random()
        if holder not in counts and action < 0.5:
            counts[holder] = rng.randrange(5)
            shares.join(holder, counts[holder])
        elif holder in counts and action < 0.05:
            del counts[holder]
            shares.leave(holder)
        elif holder in counts and (action < 0.55 or counts[holder] == 0):
            counts[holder] += 1
            shares.change(holder, 1)
        elif holder in counts:
            counts[holder] -= 1
            shares.change(holder, -1)
        assert shares.total == sum(counts.values())
        largest = shares.largest()
        most = max(counts.values(), default=0)
        if most == 0:
            assert largest is None
        else:
            assert largest is not None and counts[largest] == most
